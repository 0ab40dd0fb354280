// Cases across processes, each timed by one Python script in one run:
//  - CUDA IPC: a handle exported, sent to another process over a pipe, opened
//    there and closed (per tensor), and the importer's first read of it, beside
//    torch's own CUDA IPC (torch.multiprocessing sharing) doing the same;
//  - MPI: ping-pong of arraybridge tensors between two ranks under mpirun, beside
//    mpi4py on plain NumPy arrays of the same size.
#include <cmath>
#include <cstdio>
#include <string>

#include "bench/bench.hpp"

namespace bench {
namespace {

// Prints "<case>|<ours>|<torch>" per handle in seconds (nan: torch missing), or
// "missing: <what>". Each batch: the parent exports `count` tensors' handles and
// sends them; the child opens and closes each (then, for the touch case, reads
// its first 4 KiB), and answers; the time is the batch's over `count`.
const char* kIpcScript = R"PY(
import math, multiprocessing, sys, time
try:
    import numpy as np
    import arraybridge as ab
except ImportError as error:
    print(f"missing: {error}"); sys.exit(0)
if not any(d.name == "cuda:0" for d in ab.devices()):
    print("missing: no CUDA device"); sys.exit(0)
try:
    import torch
    import torch.multiprocessing
    torch = torch if torch.cuda.is_available() else None
except ImportError:
    torch = None

# The importing process runs a module of its own: a spawned process cannot import
# functions of a script given with -c.
CHILD = """
def child(conn):
    import numpy as np, arraybridge as ab
    host = np.empty(1024, np.float32)
    while True:
        message = conn.recv()  # unpickling a torch tensor opens its IPC handle
        if message is None:
            return
        kind, items = message
        for item in items:
            if kind.startswith("ours"):
                opened = ab.from_ipc(item)
                if kind == "ours touch":
                    ab.copy(opened, host)
                del opened  # closes the mapping (after this process's queued work)
            elif kind == "torch touch":
                item.cpu()
        del message, items, item  # torch's tensors close their mappings here
        conn.send("done")
"""

if __name__ == "__main__":
    import os, tempfile
    reps, warm, count = int(sys.argv[1]), int(sys.argv[2]), 50
    folder = tempfile.mkdtemp()
    with open(os.path.join(folder, "abr_bench_ipc_child.py"), "w") as source:
        source.write(CHILD)
    sys.path.insert(0, folder)
    import abr_bench_ipc_child
    spawn = multiprocessing.get_context("spawn")
    there, here = spawn.Pipe()
    worker = spawn.Process(target=abr_bench_ipc_child.child, args=(there,))
    worker.start()
    ours_tensors = [ab.to_device(np.ones(1024, np.float32), "cuda:0") for _ in range(count)]
    torch_tensors = [torch.ones(1024, device="cuda:0") for _ in range(count)] if torch else None
    def batch(kind):
        start = time.perf_counter()
        if kind.startswith("ours"):
            here.send((kind, [t.ipc_handle() for t in ours_tensors]))
        else:
            torch.cuda.synchronize()
            here.send((kind, torch_tensors))
        if not here.poll(600):
            print("missing: the importing process did not answer"); sys.exit(0)
        here.recv()
        return (time.perf_counter() - start) / count
    def median(kind):
        if kind.startswith("torch") and torch is None:
            return math.nan
        for _ in range(warm + 1):
            batch(kind)
        return sorted(batch(kind) for _ in range(reps))[reps // 2]
    print(f"ipc open+close|{median('ours open')}|{median('torch open')}", flush=True)
    print(f"ipc first touch|{median('ours touch')}|{median('torch touch')}", flush=True)
    here.send(None)
    worker.join()
    import shutil
    shutil.rmtree(folder, ignore_errors=True)
)PY";

// Runs the two ranks itself; prints "mpi ping-pong|<bytes>|<ours>|<numpy>" per size
// (one-way seconds per message), or "missing: <what>".
const char* kMpiScript = R"PY(
import os, shutil, subprocess, sys
mpirun = shutil.which("mpirun")
if mpirun is None:
    print("missing: mpirun is not installed (Debian: openmpi-bin)"); sys.exit(0)
try:
    import mpi4py, numpy, arraybridge
except ImportError as error:
    print(f"missing: {error}"); sys.exit(0)
ranks = r'''
import sys, time
import numpy as np, arraybridge as ab
from mpi4py import MPI
comm = MPI.COMM_WORLD
reps, warm = int(sys.argv[1]), int(sys.argv[2])
for n in (int(s) for s in sys.argv[3].split(",")):
    mine = np.ones(n, np.uint8)
    buffers = {"ours": ab.to_device(mine, "cpu"), "numpy": mine}
    rounds = max(2, min(1000, (64 << 20) // max(n, 1)))
    def ping_pong(buffer):
        comm.Barrier()
        start = time.perf_counter()
        for _ in range(rounds):
            if comm.rank == 0:
                comm.Send(buffer, dest=1); comm.Recv(buffer, source=1)
            else:
                comm.Recv(buffer, source=0); comm.Send(buffer, dest=0)
        return (time.perf_counter() - start) / rounds / 2
    times = {}
    for name, buffer in buffers.items():
        for _ in range(warm):
            ping_pong(buffer)
        times[name] = sorted(ping_pong(buffer) for _ in range(reps))[reps // 2]
    if comm.rank == 0:
        print(f"mpi ping-pong|{n}|{times['ours']}|{times['numpy']}", flush=True)
'''
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           ARRAYBRIDGE_DISABLE_OPENCL="1", ARRAYBRIDGE_DISABLE_CUDA="1")
done = subprocess.run([mpirun, "--oversubscribe", "-n", "2", sys.executable, "-c", ranks] + sys.argv[1:4],
                      env=env, capture_output=True, text=True, timeout=1800)
print(done.stdout if done.returncode == 0 else f"missing: mpirun failed: {done.stderr.strip()[-300:]}")
)PY";

}  // namespace

void run_process_cases(const Options& options, const Report& report) {
  const DLDevice cuda0{kDLCUDA, 0};
  if ((selected(options, "ipc open+close") || selected(options, "ipc first touch")) &&
      device_selected(options, cuda0)) {
    progress("CUDA IPC", 0);
    std::string error;
    const std::string output = run_python(
        options, kIpcScript, std::to_string(options.repetitions) + " " + std::to_string(options.warmup), &error);
    int rows = 0;
    for (const std::string& line : lines_of(output)) {
      char name[32] = {};
      double ours = 0, torch = 0;
      if (std::sscanf(line.c_str(), "%31[^|]|%lf|%lf", name, &ours, &torch) != 3 || !selected(options, name)) continue;
      Result r{name, "cuda:0", 0};
      r.unit = "ns";
      r.size_bytes = 4096;  // each tensor: 1024 float32
      r.seconds = ours;
      r.baselines.push_back(baseline("torch ipc", std::isnan(torch) ? 0 : torch, "torch with CUDA is not installed"));
      report(r);
      ++rows;
    }
    note_script_end("CUDA IPC cases", rows, output, error);
  }
  if (selected(options, "mpi ping-pong") && device_selected(options, {kDLCPU, 0})) {
    progress("MPI", 0);
    std::string sizes, error;
    for (uint64_t size : options.sizes) sizes += (sizes.empty() ? "" : ",") + std::to_string(size);
    const std::string output =
        run_python(options, kMpiScript,
                   std::to_string(options.repetitions) + " " + std::to_string(options.warmup) + " " + sizes, &error);
    int rows = 0;
    for (const std::string& line : lines_of(output)) {
      unsigned long long bytes = 0;
      double ours = 0, numpy = 0;
      if (std::sscanf(line.c_str(), "mpi ping-pong|%llu|%lf|%lf", &bytes, &ours, &numpy) != 3) continue;
      Result r{"mpi ping-pong", "cpu", bytes};
      r.size_bytes = bytes;
      r.seconds = ours;
      r.baselines.push_back(baseline("np mpi", numpy));
      report(r);
      ++rows;
    }
    note_script_end("mpi ping-pong", rows, output, error);
  }
}

}  // namespace bench
