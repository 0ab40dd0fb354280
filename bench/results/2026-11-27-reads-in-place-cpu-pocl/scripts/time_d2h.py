# Wall time per tensor of 1000 x 4 KiB D2H batches (cuda:0 -> cpu) on the fake CUDA driver.
import numpy as np, arraybridge as ab, time
small = [np.full(1024, i, dtype=np.float32) for i in range(1000)]
on = ab.to_device(small, "cuda:0")
def med(fn, n=100):
    for _ in range(5): fn()
    ts=[]
    for _ in range(n):
        t=time.perf_counter(); fn(); ts.append(time.perf_counter()-t)
    ts.sort(); return ts[n//2], ts[n//4]
def nb():
    r = ab.to_device(on, "cpu", non_blocking=True)
    r[-1].wait()
b = med(lambda: ab.to_device(on, "cpu"))
n = med(nb)
print(f"D2H blocking {b[0]*1e3:.3f} (p25 {b[1]*1e3:.3f})  non_blocking+wait {n[0]*1e3:.3f} (p25 {n[1]*1e3:.3f}) us/tensor")
