import numpy as np, arraybridge as ab, sys
direction, n = sys.argv[1], int(sys.argv[2])
a = np.full(1024, 1, dtype=np.float32)
d = ab.to_device(a, "cuda:0")
for _ in range(n):
    if direction == "h2d":
        r = ab.to_device(a, "cuda:0", copy=True)
    else:
        r = ab.to_device(d, "cpu")
    del r
