// The Python package's cases, each timed by one Python in one run:
//  - its cost: numpy -> arraybridge.to_device("cpu") -> np.from_dlpack, a zero-copy
//    round trip through the runtime, beside np.from_dlpack alone on the same array;
//  - staged copies between NumPy and cuda:0 as Python users write them, beside
//    torch and CuPy doing the same on the same arrays (where they are installed).
#include <unistd.h>

#include <cmath>
#include <initializer_list>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench.hpp"

namespace bench {
namespace {

// together(fns, reps, warm, sync): the median seconds a call of each of fns (None:
// nan), their samples taken in turn with the order reversed each round (ABBA), as
// the C++ rows' time_together: a drift in the machine falls on ours and the
// baseline alike. A sample repeats a call under 1 ms to last about 1 ms; sync()
// ends each sample (a GPU's queue).
#define ABR_BENCH_PYTHON_TOGETHER                                                               \
  "def together(fns, reps, warm, sync=lambda: None):\n"                                         \
  "    live = [i for i, fn in enumerate(fns) if fn is not None]\n"                              \
  "    calls = {}\n"                                                                            \
  "    for i in live:\n"                                                                        \
  "        for _ in range(warm):\n"                                                             \
  "            fns[i]()\n"                                                                      \
  "        sync(); t = time.perf_counter(); fns[i](); sync(); once = time.perf_counter() - t\n" \
  "        calls[i] = max(1, min(10000, math.ceil(1e-3 / max(once, 1e-9))))\n"                  \
  "    samples = {i: [] for i in live}\n"                                                       \
  "    for round in range(max(reps, 1)):\n"                                                     \
  "        for i in (live if round % 2 == 0 else live[::-1]):\n"                                \
  "            t = time.perf_counter()\n"                                                       \
  "            for _ in range(calls[i]):\n"                                                     \
  "                fns[i]()\n"                                                                  \
  "            sync(); samples[i].append((time.perf_counter() - t) / calls[i])\n"               \
  "    return [sorted(samples[i])[len(samples[i]) // 2] if i in samples else math.nan for i in range(len(fns))]\n"

// Every script's start: NumPy and the package, or "missing: <what>" and exit; then together().
#define ABR_BENCH_PYTHON_IMPORTS                                                                               \
  "import math, os, sys, time\n"                                                                               \
  "os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')  # idle BLAS threads spin on a core the timings share\n" \
  "try:\n"                                                                                                     \
  "    import numpy as np\n"                                                                                   \
  "except ImportError:\n"                                                                                      \
  "    print(f\"missing: NumPy is not installed for {sys.executable}\"); sys.exit(0)\n"                        \
  "try:\n"                                                                                                     \
  "    import arraybridge as ab\n"                                                                             \
  "except ImportError as error:\n"                                                                             \
  "    print(f\"missing: the arraybridge package is not installed for {sys.executable} ({error})\"); "         \
  "sys.exit(0)\n" ABR_BENCH_PYTHON_TOGETHER

// Prints "<case>|<ours>|<baseline>|<baseline>" per call in seconds (medians of
// samples taken in turn, together(); nan for what is not installed), or "missing: <what>".
const char* kScript = ABR_BENCH_PYTHON_IMPORTS R"PY(
import importlib
reps, warm = max(int(sys.argv[1]), 9), int(sys.argv[2])
a = np.ones(1024, dtype=np.float32)
def optional(name):
    try:
        return importlib.import_module(name)
    except Exception:
        return None
class PassThrough:  # the two hand-overs in pure Python: what any wrapper costs at least
    __slots__ = ("x",)
    def __init__(self, x): self.x = x
    def __dlpack__(self, **kwargs): return self.x.__dlpack__(**kwargs)
    def __dlpack_device__(self): return self.x.__dlpack_device__()
jnp, tvm, torch = optional("jax.numpy"), optional("tvm_ffi"), optional("torch")
assert ab.to_device(a, "cpu").report.path == "zero_copy"
def row(name, ours, *baselines):  # ours and each baseline timed in turn
    times = together([ours, *baselines, None][:3], reps, warm)
    print("|".join([name] + [repr(t) for t in times]), flush=True)
ours = lambda: np.from_dlpack(ab.to_device(a, "cpu"))
row("python round trip", ours, lambda: np.from_dlpack(a), lambda: np.from_dlpack(PassThrough(a)))
row("round trip vs peers", ours, jnp and (lambda: np.from_dlpack(jnp.from_dlpack(a))),
    tvm and (lambda: np.from_dlpack(tvm.from_dlpack(a))))
if torch is not None:
    row("round trip vs torch", ours, lambda: np.from_dlpack(torch.from_dlpack(a)))
tensor = ab.to_device(a, "cpu")
if tvm is not None:
    peer = tvm.core.DLTensorTestWrapper(tvm.from_dlpack(a))  # a tvm-ffi tensor type with a C exchange API
    row("exchange round trip", lambda: tvm.from_dlpack(ab.from_dlpack(peer)), lambda: tvm.from_dlpack(peer))
if torch is not None and hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
    t = torch.from_dlpack(a)
    row("torch exchange trip", lambda: ab._core.hand_over(ab.from_dlpack(t), torch.Tensor),
        lambda: torch.from_dlpack(t))
if torch is not None:  # torch's own CPU ops on the same tensor: .numpy() beside our view, .clone() beside our copy
    t = torch.from_numpy(a)
    row("torch to numpy", lambda: np.from_dlpack(ab.to_device(t, "cpu")), t.numpy)
    row("torch copy", lambda: ab.to_device(t, "cpu", copy=True), t.clone)
# The hand-over alone, timed in C (a million calls), beside __dlpack__ timed in turn with nothing.
owned, view = ab._core.handover_ns(tensor, 1000000)
print(f"exchange hand-over|{owned * 1e-9!r}|{together([tensor.__dlpack__], reps, warm)[0]!r}|nan", flush=True)
)PY";

// convert_memory, the seed API users call in loops, on a 64x64 float32 array between
// the CPU frameworks: ours beside what a user writes without a bridge (the framework's
// own call) and, where ARRAYBRIDGE_BENCH_SEED names a folder holding the seed
// project's package (PyPI arraybridge 0.5.x, which shares our import name), the seed's
// convert_memory, timed in a process of its own (so not in turn with ours). Ours and
// the framework's own call are timed in turn (together()). Prints
// "<case>|<ours>|<own>|<seed>" per call in seconds (nan for what is not installed or measured).
const char* kConvertScript = ABR_BENCH_PYTHON_IMPORTS R"PY(
import subprocess
# What both processes run first, ours and the seed's: the frameworks there are, their arrays, the timing.
SETUP = """
import importlib, math, sys, time
import numpy as np
def optional(name):
    try:
        return importlib.import_module(name)
    except Exception:
        return None
torch, jax, tf = optional("torch"), optional("jax"), optional("tensorflow")
jnp = jax and importlib.import_module("jax.numpy")
data = {"numpy": np.ones((64, 64), np.float32)}
if torch: data["torch"] = torch.ones(64, 64)
if jax: data["jax"] = jnp.ones((64, 64), jnp.float32)
if tf: data["tensorflow"] = tf.ones((64, 64), tf.float32)
def median(body, reps, warm, calls=2000):
    def batch():
        for _ in range(calls):
            body()
    for _ in range(warm):
        batch()
    times = []
    for _ in range(max(reps, 3)):
        t = time.perf_counter(); batch(); times.append((time.perf_counter() - t) / calls)
    return sorted(times)[len(times) // 2]
"""
exec(SETUP)
reps, warm = int(sys.argv[1]), int(sys.argv[2])
OWN = {  # what a user writes without any bridge
    "torch->numpy": lambda x: x.numpy(), "jax->numpy": lambda x: np.asarray(x),
    "tensorflow->numpy": lambda x: x.numpy(), "tensorflow->torch": lambda x: torch.from_dlpack(x),
    "numpy->jax": lambda x: jnp.asarray(x), "numpy->torch": lambda x: torch.from_numpy(x),
    "torch->jax": lambda x: jnp.from_dlpack(x), "torch->tensorflow": lambda x: tf.convert_to_tensor(x.numpy()),
}
SHORT = {"numpy": "np", "tensorflow": "tf", "torch": "torch", "jax": "jax"}
def row(pair):  # "py conv tf->np": the table's case column is 20 wide
    return "py conv " + "->".join(SHORT[side] for side in pair.split("->"))
pairs = [p for p in OWN if all(side in data for side in p.split("->")) and row(p) in sys.argv[4].split(",")]
seed = {}
if pairs and os.environ.get("ARRAYBRIDGE_BENCH_SEED"):  # the seed's package shadows ours there
    script = SETUP + f"""
import arraybridge as ab
for pair in {pairs!r}:
    s, d = pair.split("->")
    x = data[s]
    print(pair, median(lambda: ab.convert_memory(x, s, d, ab.HOST), {reps}, {warm}), flush=True)
"""
    env = dict(os.environ, PYTHONPATH=os.environ["ARRAYBRIDGE_BENCH_SEED"], TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=900)
    for line in done.stdout.splitlines():
        pair, _, seconds = line.partition(" ")
        seed[pair] = float(seconds)
    if not seed:
        print(f"seed: {(done.stderr.strip().splitlines() or ['no output'])[-1][:160]}", flush=True)
for pair in pairs:
    s, d = pair.split("->")
    x, own = data[s], OWN[pair]
    ours, by_own = together([lambda: ab.convert.convert_memory(x, s, d, None), lambda: own(x)], max(reps, 9), warm)
    print(f"{row(pair)}|{ours!r}|{by_own!r}|{seed.get(pair, math.nan)!r}", flush=True)
)PY";

// Prints "<case>|<bytes>|<ours>|<torch>|<cupy>" per case and size (seconds, nan for
// a peer that is missing), or "missing: <what>".
const char* kStagingScript = ABR_BENCH_PYTHON_IMPORTS R"PY(
try:
    import torch
    torch = torch if torch.cuda.is_available() else None
except ImportError:
    torch = None
try:
    import cupy
    cupy = cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
except Exception:
    cupy = None
if torch is None and cupy is None:
    print(f"missing: neither torch nor CuPy with a GPU is installed for {sys.executable}"); sys.exit(0)
reps, warm = int(sys.argv[1]), int(sys.argv[2])
def sync():
    torch.cuda.synchronize() if torch is not None else cupy.cuda.runtime.deviceSynchronize()
for n in (int(s) for s in sys.argv[3].split(",")):
    a = np.ones(n, dtype=np.uint8)
    out = np.zeros(n, dtype=np.uint8)
    td = torch.zeros(n, dtype=torch.uint8, device="cuda:0") if torch is not None else None
    cd = cupy.zeros(n, dtype=cupy.uint8) if cupy is not None else None
    device = td if td is not None else cd  # what arraybridge copies to and from: a peer's own array
    cases = {
        "py H2D existing": (lambda: ab.copy(a, device), td is not None and (lambda: td.copy_(torch.from_numpy(a))),
                            cd is not None and (lambda: cd.set(a))),
        "py D2H existing": (lambda: ab.copy(device, out), td is not None and (lambda: torch.from_numpy(out).copy_(td)),
                            cd is not None and (lambda: cd.get(out=out))),
        "py H2D new buffer": (lambda: ab.to_device(a, "cuda:0"), td is not None and (lambda: torch.from_numpy(a).cuda()),
                              cd is not None and (lambda: cupy.asarray(a))),
        "py D2H new buffer": (lambda: np.from_dlpack(ab.to_device(device, "cpu")), td is not None and (lambda: td.cpu()),
                              cd is not None and (lambda: cupy.asnumpy(cd))),
    }
    for case, (ours, by_torch, by_cupy) in cases.items():
        if case not in sys.argv[4].split(","):
            continue
        times = together([ours, by_torch or None, by_cupy or None], reps, warm, sync)
        print(f"{case}|{n}|" + "|".join(repr(t) for t in times), flush=True)
    del td, cd, device
)PY";

// Many tensors and queued work on a GPU, beside torch and TensorDict (issue 35).
// Prints "<case>|<bytes>|<ours>|<first baseline>|<second baseline>" in seconds (nan
// for one not measured), or "missing: <what>". The batches: 1000 x 4 KiB, and a
// state-dict shape (200 tensors from 4 KiB to 64 MiB, about 1 GiB, mixed dtypes).
// The "py td" rows give the same move of ours beside TensorDict's to() of the
// structure and its consolidate() (every leaf packed into one storage) then to().
const char* kGpuBatchScript = ABR_BENCH_PYTHON_IMPORTS R"PY(
import collections
try:
    import torch
    torch = torch if torch.cuda.is_available() else None
except ImportError:
    torch = None
if torch is None:
    print(f"missing: torch with a GPU is not installed for {sys.executable}"); sys.exit(0)
try:
    from tensordict import TensorDict
except Exception as error:  # not installed, or broken beside this torch: the td rows say which
    TensorDict = None
    print(f"tensordict: {type(error).__name__}: {error}".splitlines()[0][:160], flush=True)
reps, warm, chosen = int(sys.argv[1]), int(sys.argv[2]), sys.argv[4].split(",")
def median(fn):
    return together([fn], max(3, reps // 4), warm, torch.cuda.synchronize)[0]
def nbytes(arrays):
    return sum(a.nbytes for a in arrays)
def tensordict(leaves, device):  # (to, consolidate + to), None without TensorDict
    if TensorDict is None:
        return None, None
    td = TensorDict({f"t{i}": t for i, t in enumerate(leaves)}, batch_size=[])
    return lambda: td.to(device, non_blocking=True), lambda: td.consolidate().to(device, non_blocking=True)
small = [np.full(1024, i, dtype=np.float32) for i in range(1000)]
dtypes = (np.float32, np.float16, np.int64, np.int8)
counts = ((8, 64 << 20), (16, 16 << 20), (32, 4 << 20), (48, 1 << 20), (48, 256 << 10), (48, 4 << 10))
# A state dict as model.state_dict() returns it: an OrderedDict of torch tensors, passed as it is.
state = collections.OrderedDict(
    (f"w{i}_{j}", torch.from_numpy(np.ones(size // np.dtype(dtypes[j % 4]).itemsize, dtype=dtypes[j % 4])))
    for i, (count, size) in enumerate(counts) for j in range(count))
# Ours and each row's baselines timed together (ABBA rounds): torch's loop of 1000
# calls moved 8-11 ms between runs on an H200, so a ratio from blocks timed one
# after the other was judged on drift. The state dict (1 GiB) in fewer rounds.
def timed(fns, small_rows):
    return together(fns, max(reps, 15) if small_rows else max(3, reps // 4), warm, torch.cuda.synchronize)
for name, short, given in (("batch", "batch", small), ("state dict", "state", state)):
    arrays = list(given.values()) if isinstance(given, dict) else given  # the loops' tensors, in order
    h2d, td_h2d = f"py {name} H2D", f"py td {short} H2D"
    def ours():
        return ab.to_device(given, "cuda:0")
    if h2d in chosen:
        if name == "batch":  # torch's loop from pinned memory, which its users pin for this
            pinned = [torch.as_tensor(a).pin_memory() for a in arrays]
            other = lambda: [t.to("cuda", non_blocking=True) for t in pinned]
        else:  # the link: one pinned block of the same bytes in one copy
            pinned = torch.empty(nbytes(arrays), dtype=torch.uint8).pin_memory()
            other = lambda: pinned.to("cuda", non_blocking=True)
        loop = lambda: [torch.as_tensor(a).to("cuda", non_blocking=True) for a in arrays]  # NumPy or torch
        times = timed([ours, loop, other], name == "batch")
        del pinned
        print(f"{h2d}|{nbytes(arrays)}|" + "|".join(repr(t) for t in times), flush=True)
    if td_h2d in chosen:
        times = timed([ours, *tensordict([torch.as_tensor(a) for a in arrays], "cuda:0")], name == "batch")
        print(f"{td_h2d}|{nbytes(arrays)}|" + "|".join(repr(t) for t in times), flush=True)
    d2h, td_d2h = f"py {name} D2H", f"py td {short} D2H"
    if d2h in chosen or td_d2h in chosen:
        on_gpu = [torch.as_tensor(a).cuda() for a in arrays]
        on_gpu_given = type(given)(zip(given, on_gpu)) if isinstance(given, dict) else on_gpu
        # non_blocking as torch's loop: results in page-locked memory, one synchronize (together's)
        def ours():
            return ab.to_device(on_gpu_given, "cpu", non_blocking=True)
    if d2h in chosen:
        if name == "batch":
            into = [torch.empty_like(t, device="cpu").pin_memory() for t in on_gpu]
            other = lambda: [p.copy_(t, non_blocking=True) for p, t in zip(into, on_gpu)]
        else:
            block = torch.empty(nbytes(arrays), dtype=torch.uint8, device="cuda:0")
            into = torch.empty(nbytes(arrays), dtype=torch.uint8).pin_memory()
            other = lambda: into.copy_(block, non_blocking=True)
        times = timed([ours, lambda: [t.to("cpu", non_blocking=True) for t in on_gpu], other], name == "batch")
        into = block = other = None
        print(f"{d2h}|{nbytes(arrays)}|" + "|".join(repr(t) for t in times), flush=True)
    if td_d2h in chosen:
        times = timed([ours, *tensordict(on_gpu, "cpu")], name == "batch")
        print(f"{td_d2h}|{nbytes(arrays)}|" + "|".join(repr(t) for t in times), flush=True)
    if d2h in chosen or td_d2h in chosen:
        del on_gpu, on_gpu_given
# The same state dict copied into tensors that exist (load_state_dict into a model's
# parameters; a checkpoint saved into arrays kept for it): one ab.copy of the state
# dicts, beside torch's loop of copy_(non_blocking=True) and the link's one pinned block.
if "py state copy H2D" in chosen or "py state copy D2H" in chosen:
    host = list(state.values())
    model = collections.OrderedDict((key, torch.zeros_like(h, device="cuda:0")) for key, h in state.items())
    params = list(model.values())
    pinned = torch.empty(nbytes(host), dtype=torch.uint8).pin_memory()
    on_gpu = torch.empty(nbytes(host), dtype=torch.uint8, device="cuda:0")
    if "py state copy H2D" in chosen:
        times = timed([lambda: ab.copy(state, model), lambda: [p.copy_(h, non_blocking=True) for p, h in zip(params, host)],
                       lambda: on_gpu.copy_(pinned, non_blocking=True)], False)
        print(f"py state copy H2D|{nbytes(host)}|" + "|".join(repr(t) for t in times), flush=True)
    if "py state copy D2H" in chosen:
        times = timed([lambda: ab.copy(model, state), lambda: [h.copy_(p, non_blocking=True) for h, p in zip(host, params)],
                       lambda: pinned.copy_(on_gpu, non_blocking=True)], False)
        print(f"py state copy D2H|{nbytes(host)}|" + "|".join(repr(t) for t in times), flush=True)
    del params, model, pinned, on_gpu
if "py overlap" in chosen:  # a 256 MiB H2D queued beside a matmul of about its length on another stream
    src = ab.to_device(np.ones(256 << 20, dtype=np.uint8), "cuda_host")
    copy_stream, compute_stream = torch.cuda.Stream(), torch.cuda.Stream()
    a = torch.randn(4096, 4096, device="cuda:0")
    def copy():
        return ab.to_device(src, "cuda:0", non_blocking=True, stream=copy_stream)
    one = median(lambda: a @ a)
    copy_alone = median(copy)
    rounds = max(1, round(copy_alone / one))
    def compute():
        with torch.cuda.stream(compute_stream):
            for _ in range(rounds):
                a @ a
    longer = max(copy_alone, median(compute))
    def both():
        compute()
        return copy()
    print(f"py overlap|{256 << 20}|{median(both)!r}|{longer!r}|{math.nan!r}", flush=True)
)PY";

// Prints "<case>|<bytes>|<ours>|<numpy>" per case and size, in seconds per call
// (the median of batches of at least 1 ms).
const char* kHostCopyScript = ABR_BENCH_PYTHON_IMPORTS R"PY(
reps, warm = int(sys.argv[1]), max(int(sys.argv[2]), 3)
def row(name, n, ours, baseline):
    print(f"{name}|{n}|" + "|".join(repr(t) for t in together([ours, baseline], reps, warm)), flush=True)
chosen = sys.argv[4].split(",")
for n in (int(s) for s in sys.argv[3].split(",")):
    a = np.ones(n // 4, dtype=np.float32)
    b = np.empty_like(a)
    if "py copy" in chosen:
        row("py copy", n, lambda: ab.copy(a, b), lambda: np.copyto(b, a))
    if "py to_device copy" in chosen:
        row("py to_device copy", n, lambda: ab.to_device(a, "cpu", copy=True), a.copy)
xs = [np.full(1024, i, dtype=np.float32) for i in range(256)]
ys = [np.empty_like(x) for x in xs]
if "py many small" in chosen:
    row("py many small", 256 * 4096, lambda: [ab.to_device(x, "cpu", copy=True) for x in xs], lambda: [x.copy() for x in xs])
if "py batch" in chosen:
    row("py batch", 256 * 4096, lambda: ab.to_device(xs, "cpu", copy=True),
        lambda: [ab.to_device(x, "cpu", copy=True) for x in xs])
if "py copy batch" in chosen:  # one ab.copy of two lists, beside NumPy's loop of np.copyto
    row("py copy batch", 256 * 4096, lambda: ab.copy(xs, ys), lambda: [np.copyto(y, x) for x, y in zip(xs, ys)])
)PY";

// Tensors between two NIXL peers (issue 38), beside NIXL used directly on the same NumPy
// arrays: registering them each time, and registered beforehand. Prints
// "py nixl send|<bytes>|<ours>|<register each time>|<registered before>" in seconds, or
// "missing: <what>".
// One array from one Ray actor to another: a NumPy array through arraybridge.ray's
// transport (the receiver READs the sender's registered memory over NIXL) beside Ray's
// object store (serialized, put in shared memory, read by the receiver); a torch CPU
// tensor through ours beside Ray's own NIXL transport (torch only), one transfer of
// each in turn (ABBA). Prints "<case>|<bytes>|<ours>|<baseline>" per size in seconds,
// or "missing: <what>".
const char* kRayScript = ABR_BENCH_PYTHON_IMPORTS R"PY(
import importlib.util
try:
    os.environ.setdefault("UCX_MODULES", "^ib")
    import ray
    import arraybridge.ray as abray
    from arraybridge.nixl import nixl_available
except ImportError as error:
    print(f"missing: ray is not installed for {sys.executable} ({error})"); sys.exit(0)
if not nixl_available():
    print("missing: NIXL is not installed (pip install --no-deps nixl-cu12)"); sys.exit(0)
reps, warm, sizes = int(sys.argv[1]), int(sys.argv[2]), [int(s) for s in sys.argv[3].split(",")]
chosen = sys.argv[4].split(",")
try:
    import torch
except ImportError:
    torch = None
# The CUDA rows: each framework's arrays on cuda:0 between two actors that share the GPU.
on_gpu = [c[len("py ray cuda "):] for c in chosen if c.startswith("py ray cuda ")]
gpu = bool(on_gpu) and torch is not None and torch.cuda.is_available()
why_not = "" if gpu else "no CUDA GPU that torch sees here"
for framework in on_gpu if gpu else []:
    if importlib.util.find_spec(framework) is None:
        why_not += f"{'; ' if why_not else ''}{framework} is not installed for {sys.executable}"
on_gpu = [f for f in on_gpu if gpu and importlib.util.find_spec(f)]
if why_not and len(on_gpu) + len(set(chosen) & {"py ray", "py ray torch"}) == 0:
    print(f"missing: {why_not}"); sys.exit(0)  # nothing left to measure: no Ray started
if why_not and any(c.startswith("py ray cuda ") for c in chosen):
    print(f"ray-cuda: {why_not}", flush=True)
ray.init(num_cpus=2, num_gpus=1 if gpu else 0, include_dashboard=False, log_to_driver=False,
         runtime_env={"env_vars": {"OPENBLAS_NUM_THREADS": "1", "UCX_MODULES": "^ib",
                                   "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}})
abray.register(sorted({"numpy"} | ({"torch"} if torch is not None else set()) | set(on_gpu)))
@ray.remote
class Sender:
    @ray.method(tensor_transport="AB_NUMPY")
    def ours(self, n):
        return np.ones(n, dtype=np.uint8)
    def store(self, n):
        return np.ones(n, dtype=np.uint8)
    @ray.method(tensor_transport="AB_TORCH")
    def ours_torch(self, n):
        return torch.ones(n, dtype=torch.uint8)
    @ray.method(tensor_transport="nixl")
    def ray_nixl(self, n):
        return torch.ones(n, dtype=torch.uint8)
@ray.remote(enable_tensor_transport=True)
class Receiver:
    def take(self, x):
        return x.nbytes if hasattr(x, "nbytes") else x.numel()
def cuda_ones(framework, n):
    if framework == "torch":
        return torch.ones(n, dtype=torch.uint8, device="cuda:0")
    if framework == "cupy":
        import cupy
        return cupy.ones(n, dtype=cupy.uint8)
    import jax, jax.numpy as jnp
    return jax.device_put(jnp.ones(n, dtype=jnp.uint8), jax.devices("gpu")[0])
def cuda_sender(framework):
    """ours (arraybridge's transport), store (Ray's object store), and for torch theirs
    (Ray's own NIXL transport), each returning n bytes on cuda:0: three functions, as
    ray.method marks the very function it is given."""
    def ours(self, n):
        return cuda_ones(framework, n)
    def store(self, n):
        return cuda_ones(framework, n)
    def theirs(self, n):
        return cuda_ones(framework, n)
    methods = {"ours": ray.method(tensor_transport=abray.transport(framework))(ours), "store": store}
    if framework == "torch":
        methods["theirs"] = ray.method(tensor_transport="nixl")(theirs)
    return ray.remote(num_gpus=0.5)(type(f"CudaSender_{framework}", (), methods)).remote()
@ray.remote(num_gpus=0.5, enable_tensor_transport=True)
class CudaReceiver:
    def __init__(self, framework):
        self.framework = framework
        abray.receive_on("cuda:0", framework)
    def take(self, x):
        if self.framework == "torch":
            torch.cuda.synchronize()
            return x.numel()
        if self.framework == "cupy":
            import cupy
            cupy.cuda.runtime.deviceSynchronize()
        else:
            x.block_until_ready()
        return x.nbytes
sender, receiver = Sender.remote(), Receiver.remote()
def in_turn(makes, n, to=None):
    """The median seconds of one actor-to-actor transfer of n bytes by each of makes (None:
    nan), timed in turn (together(): a transfer takes milliseconds, so one per sample)."""
    to = to or receiver
    def once(make):
        assert ray.get(to.take.remote(make.remote(n)), timeout=60) == n  # a hang is an error, never the bench's end
    return together([make and (lambda make=make: once(make)) for make in makes], max(reps, 3), max(warm, 1))
def ray_nixl(make, n, to=None):
    """make, or None where Ray's own NIXL transport cannot run here (it imports the `nixl`
    meta package, which NIXL's wheel alone is not): said as a note, for each size."""
    try:
        assert ray.get((to or receiver).take.remote(make.remote(n)), timeout=60) == n
        return make
    except Exception as error:
        print(f"ray-nixl: {type(error).__name__}: {str(error).splitlines()[0][:160]}", flush=True)
        return None
for n in sizes:
    if "py ray" in chosen:
        print(f"py ray|{n}|" + "|".join(repr(t) for t in in_turn([sender.ours, sender.store], n)), flush=True)
    if "py ray torch" in chosen and torch is not None:
        times = in_turn([sender.ours_torch, ray_nixl(sender.ray_nixl, n)], n)
        print(f"py ray torch|{n}|" + "|".join(repr(t) for t in times), flush=True)
# One framework's pair at a time: each actor holds half of the one GPU Ray was given, so
# a second pair made beside the first would wait for a GPU forever.
for framework in on_gpu:
    by, to = cuda_sender(framework), CudaReceiver.remote(framework)
    try:
        for n in sizes:
            theirs = ray_nixl(by.theirs, n, to) if framework == "torch" else by.store
            times = in_turn([by.ours, theirs], n, to)
            print(f"py ray cuda {framework}|{n}|" + "|".join(repr(t) for t in times), flush=True)
    except Exception as error:  # that framework's pair is left out from here on; the others go on
        print(f"ray-cuda: {framework} at {n} bytes: {type(error).__name__}: {str(error).splitlines()[0][:160]}",
              flush=True)
    for actor in (by, to):
        ray.kill(actor)
ray.shutdown()
)PY";

const char* kNixlScript = ABR_BENCH_PYTHON_IMPORTS R"PY(
from arraybridge import nixl
if not nixl.nixl_available():
    print(f"missing: NIXL is not installed for {sys.executable} (pip install --no-deps nixl-cu12)"); sys.exit(0)
from arraybridge.nixl._load import load_nixl
nixl.skip_infiniband()  # UCX's InfiniBand module crashes the process at exit on a machine without one
raw = load_nixl()
reps, warm = int(sys.argv[1]), int(sys.argv[2])
def finish(agent, handle):  # polls a posted READ to its end, as NIXL's examples do
    state = agent.transfer(handle)
    while state == "PROC":
        state = agent.check_xfer_state(handle)
    assert state == "DONE", state
# Two peers (and two bare agents for the baselines) in this one process: UCX moves
# the bytes between them with cma, as it does between two processes on one machine.
sender, receiver = nixl.Peer("bench-send"), nixl.Peer("bench-recv")
sender.connect(receiver.address)
receiver.peers(wait_for=1)
A, B = raw.nixl_agent("bench-raw-a"), raw.nixl_agent("bench-raw-b")  # registering each time
C, D = raw.nixl_agent("bench-pre-c"), raw.nixl_agent("bench-pre-d")  # registered beforehand
B.add_remote_agent(A.get_agent_metadata())
D.add_remote_agent(C.get_agent_metadata())
for n in (int(s) for s in sys.argv[3].split(",")):
    x = np.ones(n // 4, dtype=np.float32)
    out = np.zeros_like(x)
    def ours():
        sent = sender.send(x, to="bench-recv")
        receiver.recv("bench-send", out=out).wait()
        sent.wait()
    here, there = [(out.ctypes.data, n, 0)], [(x.ctypes.data, n, 0)]
    def register_each_time():
        src = A.register_memory([(x.ctypes.data, n, 0, "")], "DRAM")
        dst = B.register_memory([(out.ctypes.data, n, 0, "")], "DRAM")
        B.add_remote_agent(A.get_partial_agent_metadata(src))  # the reader learns the new registration
        handle = B.initialize_xfer("READ", B.get_xfer_descs(here, "DRAM"), B.get_xfer_descs(there, "DRAM"),
                                   "bench-raw-a")
        finish(B, handle)
        handle.release()
        B.deregister_memory(dst)
        A.deregister_memory(src)
    src = C.register_memory([(x.ctypes.data, n, 0, "")], "DRAM")
    dst = D.register_memory([(out.ctypes.data, n, 0, "")], "DRAM")
    D.add_remote_agent(C.get_partial_agent_metadata(src))
    prepared = D.initialize_xfer("READ", D.get_xfer_descs(here, "DRAM"), D.get_xfer_descs(there, "DRAM"),
                                 "bench-pre-c")  # made once, posted each time
    big = n >= (64 << 20)  # ours and both baselines in turn (together)
    times = together([ours, register_each_time, lambda: finish(D, prepared)], max(3, reps // 4) if big else reps,
                     max(warm, 2) if big else max(warm, 5))
    prepared.release()
    D.deregister_memory(dst)
    C.deregister_memory(src)
    x[:] = 3
    ours()
    assert (out == 3).all(), "the nixl send row moved the wrong values"
    print(f"py nixl send|{n}|" + "|".join(repr(t) for t in times), flush=True)
    del x, out
sender.close(); receiver.close()
)PY";

// Inside a checkout (run from its root, as `make demo` does) `make python` builds the
// package; elsewhere the advice is the package's own install.
std::string install_hint() {
  if (access("python/arraybridge/__init__.py", R_OK) == 0 && access("Makefile", R_OK) == 0)
    return "; `make python` builds it into .venv";
  return "; install it with `pip install ./python` from a libarraybridge checkout";
}

}  // namespace

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  for (std::size_t start = 0; start < text.size();) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::string not_measured_reason(const std::string& output, const std::string& error) {
  std::string why = error.empty() ? output.substr(0, output.find('\n')) : error;
  if (why.rfind("missing: ", 0) == 0) why = why.substr(9);
  if (why.find("arraybridge package") != std::string::npos) why += install_hint();
  return why;
}

void note_script_end(const std::string& cases, int rows, const std::string& output, const std::string& error) {
  if (rows == 0) {
    note(cases + " not measured: " + not_measured_reason(output, error));
  } else if (!error.empty()) {
    note(cases + ": only " + std::to_string(rows) + " row(s): " + error);
  }
}

namespace {

// The cases of `names` the options select, joined with commas ("" for none).
std::string chosen_cases(const Options& options, std::initializer_list<const char*> names) {
  std::string chosen;
  for (const char* name : names)
    if (selected(options, name)) chosen += (chosen.empty() ? "" : ",") + std::string(name);
  return chosen;
}

// Runs a script that takes "<reps> <warmup> <sizes> '<cases>'" and returns its output.
std::string run_sized_script(const Options& options, const char* script, const std::string& sizes,
                             const std::string& chosen, std::string* error) {
  return run_python(
      options, script,
      std::to_string(options.repetitions) + " " + std::to_string(options.warmup) + " " + sizes + " '" + chosen + "'",
      error);
}

}  // namespace

void run_python_staging_cases(const Options& options, const Report& report) {
  const std::string chosen =
      chosen_cases(options, {"py H2D existing", "py D2H existing", "py H2D new buffer", "py D2H new buffer"});
  const DLDevice cuda0{kDLCUDA, 0};
  if (chosen.empty() || !device_selected(options, cuda0)) return;
  progress("cuda:0 from Python", 0);
  std::string sizes, error;
  for (uint64_t size : options.sizes) sizes += (sizes.empty() ? "" : ",") + std::to_string(size);
  const std::string output = run_sized_script(options, kStagingScript, sizes, chosen, &error);
  int rows = 0;
  for (const std::string& line : lines_of(output)) {
    char name[32] = {};
    unsigned long long bytes = 0;
    double ours = 0, torch = 0, cupy = 0;
    if (std::sscanf(line.c_str(), "%31[^|]|%llu|%lf|%lf|%lf", name, &bytes, &ours, &torch, &cupy) != 5) continue;
    Result r{name, "cuda:0", bytes};
    r.seconds = ours;
    r.baselines.push_back(baseline("torch", std::isnan(torch) ? 0 : torch, "torch with CUDA is not installed"));
    r.baselines.push_back(baseline("cupy", std::isnan(cupy) ? 0 : cupy, "CuPy with a GPU is not installed"));
    report(r);
    ++rows;
  }
  note_script_end("Python staging cases", rows, output, error);
}

void run_python_gpu_batch_cases(const Options& options, const Report& report) {
  const std::string chosen = chosen_cases(
      options,
      {"py batch H2D", "py batch D2H", "py state dict H2D", "py state dict D2H", "py td batch H2D", "py td batch D2H",
       "py td state H2D", "py td state D2H", "py state copy H2D", "py state copy D2H", "py overlap"});
  const DLDevice cuda0{kDLCUDA, 0};
  if (chosen.empty() || !device_selected(options, cuda0)) return;
  progress("many tensors on cuda:0 from Python", 0);
  std::string error;
  const std::string output = run_sized_script(options, kGpuBatchScript, "0", chosen, &error);
  std::string td_missing = "TensorDict is not installed";
  for (const std::string& line : lines_of(output))
    if (line.rfind("tensordict: ", 0) == 0) td_missing = "TensorDict could not be imported (" + line.substr(12) + ")";
  int rows = 0;
  for (const std::string& line : lines_of(output)) {
    char name[32] = {};
    unsigned long long bytes = 0;
    double ours = 0, first = 0, second = 0;
    if (std::sscanf(line.c_str(), "%31[^|]|%llu|%lf|%lf|%lf", name, &bytes, &ours, &first, &second) != 5) continue;
    const std::string case_name = name;
    Result r{name, "cuda:0", bytes};
    r.seconds = ours;
    if (case_name == "py overlap") {
      r.baselines.push_back(baseline("longer", first));
    } else if (case_name.rfind("py td", 0) == 0) {
      r.shape = case_name.rfind("py td batch", 0) == 0 ? "1000x4KiB" : "200 tensors";
      r.baselines.push_back(baseline("td to", std::isnan(first) ? 0 : first, td_missing));
      r.baselines.push_back(baseline("td consol", std::isnan(second) ? 0 : second, td_missing));
    } else {
      const bool batch = case_name.rfind("py batch", 0) == 0;
      r.shape = batch ? "1000x4KiB" : "200 tensors";
      const bool into_existing = case_name.rfind("py state copy", 0) == 0;
      r.baselines.push_back(baseline(into_existing ? "torch cp" : "torch nb", first));
      r.baselines.push_back(baseline(batch ? "torch pin" : "link", second));
    }
    report(r);
    ++rows;
  }
  note_script_end("Python GPU batch cases", rows, output, error);
}

void run_python_convert_cases(const Options& options, const Report& report) {
  const std::string chosen =
      chosen_cases(options,
                   {"py conv torch->np", "py conv jax->np", "py conv tf->np", "py conv tf->torch", "py conv np->jax",
                    "py conv np->torch", "py conv torch->jax", "py conv torch->tf"});
  if (chosen.empty() || !device_selected(options, {kDLCPU, 0})) return;
  progress("convert_memory between frameworks", 0);
  std::string error;
  const std::string output = run_sized_script(options, kConvertScript, "0", chosen, &error);
  std::string seed_missing = "ARRAYBRIDGE_BENCH_SEED names no folder with the seed's package (PyPI arraybridge 0.5)";
  for (const std::string& line : lines_of(output))
    if (line.rfind("seed: ", 0) == 0) seed_missing = "the seed's package failed: " + line.substr(6);
  int rows = 0;
  for (const std::string& line : lines_of(output)) {
    char name[32] = {};
    double ours = 0, own = 0, seed = 0;
    if (std::sscanf(line.c_str(), "%31[^|]|%lf|%lf|%lf", name, &ours, &own, &seed) != 4) continue;
    Result r{name, "cpu", 0};
    r.unit = "ns";
    r.size_bytes = 64 * 64 * 4;
    r.shape = "64x64 f32";
    r.seconds = ours;
    r.baselines.push_back(baseline("own call", own));
    r.baselines.push_back(baseline("seed", std::isnan(seed) ? 0 : seed, seed_missing));
    report(r);
    ++rows;
  }
  note_script_end("convert_memory cases", rows, output, error);
}

void run_python_cases(const Options& options, const Report& report) {
  struct Row {
    const char* name;
    const char* first;
    const char* second;   // nullptr: one baseline
    const char* missing;  // why a baseline measured as nan is absent
  };
  static const Row rows[] = {
      {"python round trip", "np.dlpack", "py pass", ""},
      {"round trip vs peers", "jax rt", "tvm rt", "that peer is not installed"},
      {"round trip vs torch", "torch rt", nullptr, "torch is not installed"},
      {"exchange round trip", "tvm.dlpack", nullptr, "apache-tvm-ffi is not installed"},
      {"torch exchange trip", "torch.dlp", nullptr, "torch >= 2.10 is not installed"},
      {"torch to numpy", "t.numpy", nullptr, "torch is not installed"},
      {"torch copy", "t.clone", nullptr, "torch is not installed"},
      {"exchange hand-over", "capsule", nullptr, ""},
  };
  bool any = false;
  for (const Row& row : rows) any = any || selected(options, row.name);
  if (!any || !device_selected(options, {kDLCPU, 0})) return;
  progress("python", 0);
  std::string error;
  const std::string output =
      run_python(options, kScript, std::to_string(options.repetitions) + " " + std::to_string(options.warmup), &error);
  int reported = 0;
  for (const std::string& line : lines_of(output)) {
    char name[32] = {};
    double ours = 0, first = 0, second = 0;
    if (std::sscanf(line.c_str(), "%31[^|]|%lf|%lf|%lf", name, &ours, &first, &second) != 4) continue;
    for (const Row& row : rows) {
      if (std::string(name) != row.name || !selected(options, row.name)) continue;
      Result r{row.name, "cpu", 0};
      r.unit = "ns";
      r.size_bytes = 4096;  // the script's array: 1024 float32
      r.seconds = ours;
      r.baselines.push_back(baseline(row.first, std::isnan(first) ? 0 : first, row.missing));
      if (row.second) r.baselines.push_back(baseline(row.second, std::isnan(second) ? 0 : second, row.missing));
      report(r);
      ++reported;
    }
  }
  if (reported == 0) {
    const std::string why = not_measured_reason(output, error);
    note("python round trip not measured: " + why);
    progress_row_done(row_weight(0));
  }
}

void run_python_host_copy_cases(const Options& options, const Report& report) {
  const std::string chosen =
      chosen_cases(options, {"py copy", "py to_device copy", "py many small", "py batch", "py copy batch"});
  if (chosen.empty() || !device_selected(options, {kDLCPU, 0})) return;
  progress("python host copies", 0);
  // From 1 KiB (a Python call's floor) to 16 MiB: above that NumPy and we both run at memcpy's speed.
  std::string sizes = "1024";
  for (uint64_t size : options.sizes)
    if (size > 1024 && size <= (16ull << 20)) sizes += "," + std::to_string(size);
  std::string error;
  const std::string output = run_sized_script(options, kHostCopyScript, sizes, chosen, &error);
  int rows = 0;
  for (const std::string& line : lines_of(output)) {
    char name[32] = {};
    unsigned long long bytes = 0;
    double ours = 0, numpy = 0;
    if (std::sscanf(line.c_str(), "%31[^|]|%llu|%lf|%lf", name, &bytes, &ours, &numpy) != 4) continue;
    const std::string case_name = name;
    Result r{case_name, "cpu", bytes};
    if (case_name == "py many small" || case_name == "py batch" || case_name == "py copy batch") r.shape = "256x4KiB";
    r.seconds = ours;
    r.baselines.push_back(baseline(case_name == "py copy"             ? "np.copyto"
                                       : case_name == "py many small" ? "np loop"
                                       : case_name == "py copy batch" ? "copyto lp"
                                       : case_name == "py batch"      ? "py loop"
                                                                      : "a.copy",
                                   numpy));
    report(r);
    ++rows;
  }
  note_script_end("Python host copies", rows, output, error);
}

void run_python_nixl_cases(const Options& options, const Report& report) {
  if (!selected(options, "py nixl send") || !device_selected(options, {kDLCPU, 0})) return;
  progress("tensors over NIXL from Python", 0);
  std::string sizes;  // 4 KiB (a message's floor) to 1 GiB
  for (uint64_t size : options.sizes)
    if (size >= (4ull << 10) && size <= (1ull << 30)) sizes += (sizes.empty() ? "" : ",") + std::to_string(size);
  if (sizes.empty()) return;
  std::string error;
  const std::string output = run_sized_script(options, kNixlScript, sizes, "py nixl send", &error);
  int rows = 0;
  for (const std::string& line : lines_of(output)) {
    char name[32] = {};
    unsigned long long bytes = 0;
    double ours = 0, each_time = 0, before = 0;
    if (std::sscanf(line.c_str(), "%31[^|]|%llu|%lf|%lf|%lf", name, &bytes, &ours, &each_time, &before) != 5) continue;
    Result r{name, "cpu", bytes};
    r.seconds = ours;
    r.baselines.push_back(baseline("nixl reg", each_time));
    r.baselines.push_back(baseline("nixl pre", before));
    report(r);
    ++rows;
  }
  note_script_end("Python NIXL cases", rows, output, error);
}

void run_python_ray_cases(const Options& options, const Report& report) {
  std::string chosen;  // only when --case names them: they start a local Ray cluster (a minute here)
  for (const char* name : {"py ray", "py ray torch", "py ray cuda torch", "py ray cuda cupy", "py ray cuda jax"}) {
    const bool on_cuda = std::string(name).rfind("py ray cuda", 0) == 0;
    if (named(options, name) && device_selected(options, on_cuda ? DLDevice{kDLCUDA, 0} : DLDevice{kDLCPU, 0}))
      chosen += (chosen.empty() ? "" : ",") + std::string(name);
  }
  if (chosen.empty()) return;
  progress("arrays between Ray actors", 0);
  std::string sizes;  // 4 KiB to 256 MiB
  for (uint64_t size : options.sizes)
    if (size >= (4ull << 10) && size <= (256ull << 20)) sizes += (sizes.empty() ? "" : ",") + std::to_string(size);
  if (sizes.empty()) return;
  std::string error;
  const std::string output = run_sized_script(options, kRayScript, sizes, chosen, &error);
  std::string ray_nixl_missing = "Ray's NIXL transport is not available";
  for (const std::string& line : lines_of(output)) {
    if (line.rfind("ray-nixl: ", 0) == 0) ray_nixl_missing = "Ray's NIXL transport: " + line.substr(10);
    if (line.rfind("ray-cuda: ", 0) == 0) note("Ray CUDA cases not measured: " + line.substr(10));
  }
  int rows = 0;
  for (const std::string& line : lines_of(output)) {
    char name[32] = {};
    unsigned long long bytes = 0;
    double ours = 0, theirs = 0;
    if (std::sscanf(line.c_str(), "%31[^|]|%llu|%lf|%lf", name, &bytes, &ours, &theirs) != 4) continue;
    const std::string case_name = name;
    const bool by_nixl = case_name == "py ray torch" || case_name == "py ray cuda torch";
    Result r{name, case_name.rfind("py ray cuda", 0) == 0 ? "cuda:0" : "cpu", bytes};
    r.seconds = ours;
    r.baselines.push_back(
        baseline(by_nixl ? "ray nixl" : "ray store", std::isnan(theirs) ? 0 : theirs, ray_nixl_missing));
    report(r);
    ++rows;
  }
  note_script_end("Ray cases", rows, output, error);
}

}  // namespace bench
