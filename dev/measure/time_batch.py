# Wall time per tensor of 1000 x 4 KiB batches from Python on the fake CUDA driver
# (ARRAYBRIDGE_CUDA_LIBRARY=build/fake-cuda/libcuda.so.1); PYTHONPATH picks the build.
import numpy as np, arraybridge as ab, time
small = [np.full(1024, i, dtype=np.float32) for i in range(1000)]
def med(fn, n=40):
    for _ in range(5): fn()
    ts=[]
    for _ in range(n):
        t=time.perf_counter(); fn(); ts.append(time.perf_counter()-t)
    return sorted(ts)[n//2]
on = ab.to_device(small, "cuda:0")
h2d = med(lambda: ab.to_device(small, "cuda:0"))
d2h = med(lambda: ab.to_device(on, "cpu"))
cpu = med(lambda: ab.to_device(small, "cpu", copy=True))
print(f"H2D {h2d*1e3:.3f} us/tensor  D2H {d2h*1e3:.3f} us/tensor  cpu copy {cpu*1e3:.3f} us/tensor")
