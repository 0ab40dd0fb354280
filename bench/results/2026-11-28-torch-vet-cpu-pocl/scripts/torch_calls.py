# n calls of one kind, for callgrind (callgrind_torch.sh): a batch of 1000 x 4 KiB
# torch tensors to cuda:0 (the fake driver), or one torch tensor to a host view.
import sys
import arraybridge as ab
import torch
kind, n = sys.argv[1], int(sys.argv[2])
if kind == "batch":
    xs = [torch.full((1024,), i, dtype=torch.float32) for i in range(1000)]
    call = lambda: ab.to_device(xs, "cuda:0")  # noqa: E731
else:
    t = torch.ones(1024)
    call = lambda: ab.to_device(t, "cpu")  # noqa: E731
call()
for _ in range(n):
    call()
