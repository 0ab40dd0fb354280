# Ad-hoc staging measurement on the GPU machine: arraybridge beside torch, 1 GiB uint8.
import os, sys, time
import numpy as np, torch, arraybridge as ab
n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 30
reps = 5
a = np.ones(n, dtype=np.uint8)
host_dst = np.zeros(n, dtype=np.uint8)
dev = torch.empty(n, dtype=torch.uint8, device="cuda")
dev.fill_(3)
torch.cuda.synchronize()
def best(fn):
    fn(); torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); fn(); torch.cuda.synchronize(); ts.append(time.perf_counter() - t)
    ts.sort(); return n / ts[len(ts) // 2] / 1e9
res = {}
res["H2D existing ab.copy"] = best(lambda: ab.copy(a, dev))
res["H2D existing torch copy_"] = best(lambda: dev.copy_(torch.from_numpy(a)))
dev.fill_(3)
res["D2H existing ab.copy"] = best(lambda: ab.copy(dev, host_dst))
res["D2H existing torch copy_"] = best(lambda: torch.from_numpy(host_dst).copy_(dev))
res["D2H new ab.to_device cpu"] = best(lambda: np.from_dlpack(ab.to_device(dev, "cpu")))
res["D2H new torch .cpu()"] = best(lambda: dev.cpu())
res["H2D new ab.to_device cuda"] = best(lambda: ab.to_device(a, "cuda:0"))
res["H2D new torch .cuda()"] = best(lambda: torch.from_numpy(a).cuda())
assert (host_dst == 3).all()
print("threads=%s size=%d MiB" % (os.environ.get("ARRAYBRIDGE_STAGING_THREADS", "default"), n >> 20))
for k, v in res.items(): print("  %-28s %6.1f GB/s" % (k, v))
