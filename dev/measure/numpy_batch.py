# 1000 x 4 KiB NumPy arrays to cuda:0 (the fake driver) and back, n times: run under
# callgrind with n = 2 and 12, the difference / 10000 is a tensor's instructions in the
# whole process (OPENBLAS_NUM_THREADS=1). A third argument prints the median time.
import numpy as np, arraybridge as ab, sys, time
direction, n = sys.argv[1], int(sys.argv[2])
small = [np.full(1024, i, dtype=np.float32) for i in range(1000)]
on = ab.to_device(small, "cuda:0")
def h2d(): ab.to_device(small, "cuda:0")
def d2h():  # non_blocking, as the GPU bench's row: the batch's one Event waited for
    ab.to_device(on, "cpu", non_blocking=True)[0].wait()
fn = h2d if direction == "h2d" else d2h
fn()
ts = []
for _ in range(n):
    t = time.perf_counter(); fn(); ts.append(time.perf_counter() - t)
ts.sort()
if len(sys.argv) > 3: print(direction, f"{ts[len(ts)//2]*1e6/1000:.3f} us/tensor")
