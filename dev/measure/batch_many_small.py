import numpy as np, arraybridge as ab, sys, time
n, count, size = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
small = [np.full(size // 4, i, dtype=np.float32) for i in range(count)]
best = 1e9
for _ in range(n):
    t0 = time.perf_counter()
    r = ab.to_device(small, sys.argv[4], copy=True)
    best = min(best, time.perf_counter() - t0)
    del r
print("best %.3f us/tensor" % (best / count * 1e6), file=sys.stderr)
