// What arraybridge-bench can measure, in one table: each case's short name (what the
// table prints and --case matches), where it runs, and its target; each baseline's
// short label (a table column) and what it is. The legend under the table and the
// up-front checks of --case and --device read these tables, so a case that is not
// here cannot be reported.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <thread>

#include "bench/bench.hpp"

namespace bench {
namespace {

// Each case's target, as a ratio against the named baseline (what the project holds itself to).
const CaseInfo kCases[] = {
    {"host copy", Where::Cpu, true, "memcpy >= 0.9x from 64 KiB, >= 0.25x at 4 KiB"},
    {"to_device new buffer", Where::Cpu, true, "malloc+cp >= 0.9x from 64 KiB"},
    {"transpose pack", Where::Cpu, true, "numpy >= 2x"},
    {"step-2 slice pack", Where::Cpu, true, "numpy >= 1x"},
    {"negative-stride pack", Where::Cpu, true, ""},
    {"zero-copy round trip", Where::Cpu, false, ""},
    {"batch", Where::Cpu, true, "loop >= 5x (256 x 4 KiB)"},
    {"batch H2D", Where::OpenCl, true, "loop >= 5x (256 x 4 KiB)"},
    {"batch D2H", Where::OpenCl, true, "loop >= 2x (256 x 4 KiB)"},
    {"copy_many H2D", Where::OpenCl, true, ""},
    {"H2D existing buffer", Where::OpenCl, true, "clWrite >= 0.9x from 64 KiB; memcpy >= 0.9x (CPU device, large)"},
    {"D2H existing buffer", Where::OpenCl, true, "clRead >= 0.9x from 64 KiB; memcpy >= 0.9x (CPU device, large)"},
    {"H2D new buffer", Where::OpenCl, true, ""},
    {"wrap host memory", Where::OpenClSharing, true, "the same time at every size (zero-copy)"},
    {"transpose kernel", Where::OpenCl, true, ""},
    {"from another context", Where::OpenCl, true, ""},
    {"pool hit", Where::OpenCl, true, "<= 1 us"},
    {"pool miss", Where::OpenCl, true, ""},
    {"H2D pinned", Where::Cuda, true, "cuPinned >= 0.95x"},
    {"H2D pageable", Where::Cuda, true, "cuPage >= 3x and cuPinned >= 0.6x (64 MiB+, 16+ cores)"},
    {"D2H pageable", Where::Cuda, true, "cuPage >= 2.5x (64 MiB+, 16+ cores)"},
    {"D2D", Where::Cuda, true, "cuD2D >= 0.9x"},
    {"batch pinned", Where::Cuda, true, "loop >= 5x (256 x 4 KiB)"},
    {"staging copy sweep", Where::Cpu, false, "scales with the cores", true},
    {"H2D pageable sweep", Where::Cuda, false, "scales with the threads up to the link", true},
    {"D2H pageable sweep", Where::Cuda, false, "scales with the threads up to the link", true},
    {"CUDA -> OpenCL", Where::Cuda, true, "cuPinned >= 0.5x (one GPU, NVIDIA's OpenCL)"},
    {"OpenCL -> CUDA", Where::Cuda, true, "cuPinned >= 0.5x (one GPU, NVIDIA's OpenCL)"},
    {"python round trip", Where::Cpu, false, ""},
    {"round trip vs peers", Where::Cpu, false, "faster than each peer's own round trip"},
    {"round trip vs torch", Where::Cpu, false, "faster than torch's own round trip"},
    {"exchange round trip", Where::Cpu, false, "<= 1.5x tvm.dlpack (tvm-ffi -> arraybridge -> tvm-ffi)"},
    {"torch exchange trip", Where::Cpu, false, "<= 1.5x torch.dlp (torch -> arraybridge -> torch)"},
    {"torch to numpy", Where::Cpu, false, ""},
    {"torch copy", Where::Cpu, false, ""},
    {"exchange hand-over", Where::Cpu, false, "< 100 ns (our side, timed in a C loop)"},
    {"py conv torch->np", Where::Cpu, false, "own call >= 0.5x (zero-copy), seed >= 1x"},
    {"py conv jax->np", Where::Cpu, false, "own call >= 0.5x (zero-copy), seed >= 1x"},
    {"py conv tf->np", Where::Cpu, false, "own call >= 0.5x (zero-copy), seed >= 1x"},
    {"py conv tf->torch", Where::Cpu, false, "own call >= 0.5x (zero-copy), seed >= 1x"},
    {"py conv np->torch", Where::Cpu, false, "own call >= 0.5x (zero-copy), seed >= 1x"},
    {"py conv np->jax", Where::Cpu, false, "seed >= 1x"},
    {"py conv torch->jax", Where::Cpu, false, "seed >= 1x"},
    {"py conv torch->tf", Where::Cpu, false, "seed >= 1x"},
    {"py copy", Where::Cpu, true, "np.copyto: <= 3x its time at 1 KiB, >= 0.9x from 256 KiB"},
    {"py to_device copy", Where::Cpu, true, "a.copy: <= 3x its time at 1 KiB, >= 0.9x from 256 KiB"},
    {"py many small", Where::Cpu, false, "np loop: <= 3x its time"},
    {"py batch", Where::Cpu, false, "py loop >= 5x (256 x 4 KiB, one to_device of the list)"},
    {"py copy batch", Where::Cpu, false, ""},
    {"py nixl send", Where::Cpu, true, "nixl pre >= 0.3x from 16 MiB (ours adds a pack and an unpack copy)"},
    {"py ray", Where::Cpu, true, "one array actor to actor (arraybridge.ray) beside Ray's store; only with --case"},
    {"py ray torch", Where::Cpu, true, "ray nixl >= 1x (a torch tensor, ours beside Ray's own NIXL); only with --case"},
    {"py ray cuda torch", Where::Cuda, true,
     "ray nixl >= 1x (a torch tensor on cuda:0 between actors sharing the GPU: ours by IPC); only with --case"},
    {"py ray cuda cupy", Where::Cuda, true, "ray store >= 5x from 1 MiB (a CuPy array on cuda:0); only with --case"},
    {"py ray cuda jax", Where::Cuda, true, "ray store >= 5x from 1 MiB (a JAX array on cuda:0); only with --case"},
    {"py H2D existing", Where::Cuda, true, ""},
    {"py D2H existing", Where::Cuda, true, "torch >= 2x (64 MiB+, 16+ cores)"},
    {"py H2D new buffer", Where::Cuda, true, ""},
    {"py D2H new buffer", Where::Cuda, true, "torch >= 4x (64 MiB+, 16+ cores)"},
    {"py batch H2D", Where::Cuda, false, "torch nb >= 10x (1000 x 4 KiB pageable, one to_device of the list)"},
    {"py batch D2H", Where::Cuda, false, "torch nb >= 10x (1000 x 4 KiB; ours non_blocking too)"},
    {"py state dict H2D", Where::Cuda, false, "torch nb >= 2x, link >= 0.7x (200 tensors, 4 KiB-64 MiB, pageable)"},
    {"py state dict D2H", Where::Cuda, false,
     "torch nb >= 2x, link >= 0.7x (200 tensors, 4 KiB-64 MiB; ours non_blocking too)"},
    {"py state copy H2D", Where::Cuda, false, "torch cp >= 2x, link >= 0.7x (the state dict into existing tensors)"},
    {"py state copy D2H", Where::Cuda, false, "torch cp >= 2x, link >= 0.7x (the state dict into existing arrays)"},
    {"py td batch H2D", Where::Cuda, false, ""},
    {"py td batch D2H", Where::Cuda, false, ""},
    {"py td state H2D", Where::Cuda, false, ""},
    {"py td state D2H", Where::Cuda, false, ""},
    {"py overlap", Where::Cuda, false, "longer >= 0.87x: 256 MiB H2D beside a matmul in <= 1.15x the longer"},
    {"ipc open+close", Where::Cuda, false, ""},
    {"ipc first touch", Where::Cuda, false, ""},
    {"mpi ping-pong", Where::Cpu, true, "np mpi >= 0.95x"},
};

const BaselineInfo kBaselines[] = {
    {"memcpy", "memcpy of the same bytes"},
    {"malloc+cp", "malloc + memcpy + free of the same bytes"},
    {"malloc", "malloc + free of the same size"},
    {"loop", "one abr_to_device per tensor, all results kept until the last is made"},
    {"py loop", "one to_device per array from Python, the same arrays"},
    {"copy loop", "one abr_copy per pair, the same pairs"},
    {"numpy", "NumPy's ascontiguousarray of the same view"},
    {"clWrite", "clEnqueueWriteBuffer from the same host memory"},
    {"clRead", "clEnqueueReadBuffer into the same host memory"},
    {"clCreate", "clCreateBuffer + clEnqueueWriteBuffer + release"},
    {"clUseHost", "clCreateBuffer(CL_MEM_USE_HOST_PTR) + release"},
    {"clCopy", "clEnqueueCopyBuffer of the same bytes, contiguous"},
    {"naive", "a blocking read to pageable host memory, then a blocking write"},
    {"clPin", "a raw CL_MEM_ALLOC_HOST_PTR buffer, mapped, then released"},
    {"cuPinned", "cuMemcpyHtoD from page-locked memory (the link's ceiling)"},
    {"cuPage", "cuMemcpyHtoD / cuMemcpyDtoH with the same pageable memory"},
    {"cuD2D", "cuMemcpyDtoD of the same bytes"},
    {"np.dlpack", "np.from_dlpack alone on the same array"},
    {"own call", "the framework's own call, no bridge (t.numpy(), np.asarray, torch.from_numpy, ...)"},
    {"seed", "the seed's convert_memory (PyPI arraybridge 0.5 in ARRAYBRIDGE_BENCH_SEED), own process"},
    {"py pass", "a pure-Python pass-through of the same two hand-overs (the floor for any wrapper)"},
    {"jax rt", "JAX's round trip: jnp.from_dlpack then np.from_dlpack"},
    {"tvm rt", "tvm-ffi's round trip: tvm_ffi.from_dlpack then np.from_dlpack"},
    {"torch rt", "torch's round trip: torch.from_dlpack then np.from_dlpack"},
    {"tvm.dlpack", "tvm_ffi.from_dlpack alone on the same tvm-ffi tensor (through its C exchange API)"},
    {"torch.dlp", "torch.from_dlpack alone on the same torch tensor"},
    {"t.numpy", "torch's Tensor.numpy() of the same CPU tensor (a NumPy view, as ours)"},
    {"t.clone", "torch's Tensor.clone() of the same CPU tensor (a copy, as ours with copy=True)"},
    {"capsule", "the same hand-over through __dlpack__: our capsule made and dropped, from Python"},
    {"np.copyto", "NumPy's np.copyto(dst, src) of the same arrays"},
    {"a.copy", "NumPy's a.copy() of the same array"},
    {"np loop", "NumPy's a.copy() of each of the same 256 arrays, one call each"},
    {"copyto lp", "NumPy's np.copyto(b, a) of each of the same 256 pairs of arrays, one call each"},
    {"torch", "torch doing the same (copy_, .cuda(), .cpu()) on the same arrays"},
    {"torch nb", "torch's loop of .to(device, non_blocking=True) over the same arrays, then one synchronize"},
    {"torch pin", "the same loop from (or into) pinned memory, pinned beforehand"},
    {"torch cp", "torch's loop of dst.copy_(src, non_blocking=True) over the same pairs, then one synchronize"},
    {"link", "one pinned block of the same bytes in one copy (the link's speed)"},
    {"td to", "TensorDict's to(device, non_blocking=True) of the same tensors, then one synchronize"},
    {"td consol", "TensorDict's consolidate() (the leaves packed into one storage), then to()"},
    {"longer", "the longer of the two alone: the 256 MiB H2D, or the matmuls on another stream"},
    {"torch ipc", "torch's CUDA IPC (torch.multiprocessing sharing) of the same tensors, over the same pipe"},
    {"np mpi", "mpi4py ping-pong of a NumPy array of the same size, in the same ranks"},
    {"cupy", "CuPy doing the same (set, get, asarray, asnumpy) on the same arrays"},
    {"ray nixl", "Ray's own NIXL transport (tensor_transport=\"nixl\") on the same torch tensor"},
    {"ray store", "Ray's object store: the same array returned by a plain actor method, passed on"},
    {"nixl reg", "NIXL on the same NumPy arrays: register both, one READ, deregister, each time"},
    {"nixl pre", "NIXL on the same NumPy arrays, registered beforehand: one READ each time"},
};

}  // namespace

const CaseInfo* find_case(const std::string& name) {
  for (const CaseInfo& c : kCases)
    if (name == c.name) return &c;
  return nullptr;
}

const BaselineInfo& baseline_info(const std::string& label) {
  for (const BaselineInfo& b : kBaselines)
    if (label == b.label) return b;
  std::fprintf(stderr, "arraybridge-bench: internal error: baseline '%s' is not in the catalog\n", label.c_str());
  std::abort();
}

std::vector<const CaseInfo*> all_cases() {
  std::vector<const CaseInfo*> out;
  for (const CaseInfo& c : kCases) out.push_back(&c);
  return out;
}

std::vector<unsigned> sweep_threads() {
  const unsigned cores = std::min(std::max(1u, std::thread::hardware_concurrency()), 16u);
  std::vector<unsigned> counts;
  for (unsigned t = 1; t < cores; t *= 2) counts.push_back(t);
  counts.push_back(cores);
  return counts;
}

uint64_t largest_size(const Options& options) {
  uint64_t largest = 0;
  for (uint64_t s : options.sizes) largest = std::max(largest, s);
  return largest;
}

Baseline baseline(const char* label, double seconds, std::string note) {
  return {label, baseline_info(label).name, seconds, std::move(note)};
}

}  // namespace bench
