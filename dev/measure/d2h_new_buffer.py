# The py D2H new buffer row (#64) taken apart: a cuda:0 array of n bytes to a new host
# array, ours (np.from_dlpack(ab.to_device(x, "cpu"))) beside torch's x.cpu(), and the
# pieces of ours: the call alone, without NumPy's import of the result, from our own
# Tensor rather than torch's (no producer to vet), into an existing array (no new
# buffer), the import alone, and a new host array alone. Median us, timed in turn.
# On a machine without a GPU torch's rows are left out (the fake driver: ours only).
import sys, time, numpy as np, arraybridge as ab
try:
    import torch
    torch = torch if torch.cuda.is_available() else None
except ImportError:
    torch = None
sizes = [int(s) for s in (sys.argv[1] if len(sys.argv) > 1 else "4096,16384,65536,262144").split(",")]
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 301
def in_turn(fns):
    for fn in fns.values():
        for _ in range(20): fn()
    ts = {k: [] for k in fns}
    for _ in range(reps):
        for k, fn in fns.items():
            t = time.perf_counter(); fn(); ts[k].append(time.perf_counter() - t)
    return {k: sorted(v)[reps // 2] * 1e6 for k, v in ts.items()}
for n in sizes:
    a = np.ones(n, dtype=np.uint8)
    out = np.zeros(n, dtype=np.uint8)
    ours = ab.to_device(a, "cuda:0")
    fns = {}
    if torch is not None:
        td = torch.ones(n, dtype=torch.uint8, device="cuda:0")
        fns["torch cpu()"] = lambda: td.cpu()
        fns["ours row"] = lambda: np.from_dlpack(ab.to_device(td, "cpu"))
        fns["to_device"] = lambda: ab.to_device(td, "cpu")
        fns["copy existing"] = lambda: ab.copy(td, out)
        fns["import"] = lambda: ab.to_device(td, "cuda:0", copy=False)
        fns["torch copy_"] = (lambda o=torch.from_numpy(out): o.copy_(td))
    fns["ab Tensor to_device"] = lambda: ab.to_device(ours, "cpu")
    fns["ab Tensor copy existing"] = lambda: ab.copy(ours, out)
    fns["np.empty"] = lambda: np.empty(n, dtype=np.uint8)
    times = in_turn(fns)
    print(f"{n:>8} " + "  ".join(f"{k} {v:.2f}" for k, v in times.items()), flush=True)
