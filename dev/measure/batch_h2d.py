# Per-tensor instructions of a 1000 x 4 KiB batch: run under callgrind with N = 20 and 120
# (ARRAYBRIDGE_CUDA_LIBRARY=build/fake-cuda/libcuda.so.1 valgrind --tool=callgrind .venv/bin/python THIS cuda:0 N)
# and divide the difference of the totals by 100 x 1000.
import numpy as np, arraybridge as ab, sys
small = [np.full(1024, i, dtype=np.float32) for i in range(1000)]
dev = sys.argv[1]
for _ in range(int(sys.argv[2])): ab.to_device(small, dev)
