# 1000 x 4 KiB from cuda:0 (the fake driver) to the CPU in one blocking call, and
# the same non_blocking (read in place: no copy out) as a control. Median us a call.
import sys, time, numpy as np, arraybridge as ab
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
xs = [np.full(1024, i, dtype=np.float32) for i in range(n)]
ys = ab.to_device(xs, "cuda:0")
def med(fn, reps=101):
    for _ in range(10): fn()
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
    return sorted(ts)[reps // 2] * 1e6
r = ab.to_device(ys, "cpu")
assert all((np.from_dlpack(a) == x).all() for a, x in zip(r, xs))
print(f"blocking {med(lambda: ab.to_device(ys, 'cpu')):.0f} nb {med(lambda: ab.to_device(ys, 'cpu', non_blocking=True)[-1].wait()):.0f} | {r[0].report.detail[-80:]}")
