# 256 x 4 KiB opencl:0 tensors read back to the host in one call, n times: under
# callgrind (ARRAYBRIDGE_DISABLE_CUDA=1) with n = 2 and 12, the difference in
# core_to_device_many / 2560 is a tensor's instructions.
import numpy as np, arraybridge as ab, sys
n = int(sys.argv[1])
on = ab.to_device([np.full(1024, i, dtype=np.float32) for i in range(256)], "opencl:0")
ab.to_device(on, "cpu")
for _ in range(n):
    ab.to_device(on, "cpu")
