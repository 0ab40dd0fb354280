import sys, time, numpy as np, arraybridge as ab
n = 1000
xs = [np.full(1024, i, dtype=np.float32) for i in range(n)]
ys = ab.to_device(xs, "cuda:0")
def med(fn, reps=301):
    for _ in range(20): fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    return sorted(ts)[reps // 2] * 1e6
print(f"nb {med(lambda: ab.to_device(ys, 'cpu', non_blocking=True)[-1].wait()):.0f}")
