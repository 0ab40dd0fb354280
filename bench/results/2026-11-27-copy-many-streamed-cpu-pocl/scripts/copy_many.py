# Per-pair instructions: valgrind --tool=callgrind .venv/bin/python THIS DEVICE N with N = 10 and 50,
# the difference of the totals divided by 40 x 256.
# Per-pair instructions of ab.copy(list, list): 256 x 4 KiB NumPy arrays into arrays on DEVICE
import numpy as np, arraybridge as ab, sys
dev, n = sys.argv[1], int(sys.argv[2])
src = [np.full(1024, i, dtype=np.float32) for i in range(256)]
dst = [ab.to_device(np.zeros(1024, np.float32), dev) for _ in range(256)] if dev != "cpu" else [np.zeros(1024, np.float32) for _ in range(256)]
for _ in range(n): ab.copy(src, dst)
