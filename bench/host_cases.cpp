// Host-memory cases of the catalog (catalog.cpp): contiguous copy, strided packs
// (transpose, step-2 slice, negative stride), and the zero-copy round trip.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "lib/host/host_threads.hpp"
#include "bench/bench.hpp"

namespace bench {
namespace {

struct PackCase {
  const char* name;
  const char* numpy_kind;
};

}  // namespace

void run_host_cases(abr_runtime* rt, const Options& options, const Report& report) {
  if (!device_selected(options, {kDLCPU, 0})) return;
  // The host side of every staged chunk (HostThreads::copy into or out of a pinned
  // block) at each thread count, beside one memcpy: the scaling the cores allow.
  if (selected(options, "staging copy sweep")) {
    const uint64_t elements = largest_size(options) / 4;
    Buffer src(elements), dst(elements);
    const uint64_t bytes = elements * 4;
    progress("cpu", bytes);
    const Baseline plain = memcpy_baseline(options, dst.data(), src.data(), bytes);
    for (unsigned threads : sweep_threads()) {
      Result r{"staging copy sweep", "cpu", bytes};
      r.shape = std::to_string(threads) + (threads == 1 ? " thread" : " threads");
      r.seconds = time_it(options, [&] { abr::host_threads().copy(dst.data(), src.data(), bytes, threads); }).median_s;
      r.baselines.push_back(plain);
      report(r);
    }
  }
  for (uint64_t size : options.sizes) {
    const uint64_t elements = size / 4;
    if (elements == 0) continue;
    progress("cpu", elements * 4);

    if (selected(options, "host copy")) {
      Buffer src(elements), dst(elements);
      int64_t shape[1] = {static_cast<int64_t>(elements)};
      DLTensor s = view(src.data(), 1, shape, nullptr), d = view(dst.data(), 1, shape, nullptr);
      Result r{"host copy", "cpu", elements * 4};
      r.seconds = time_it(options, [&] { check(abr_copy(rt, &s, &d, nullptr, nullptr), "abr_copy"); }).median_s;
      r.baselines.push_back(memcpy_baseline(options, dst.data(), src.data(), elements * 4));
      report(r);
    }

    if (selected(options, "to_device new buffer")) {
      Buffer src(elements);
      int64_t shape[1] = {static_cast<int64_t>(elements)};
      abr_transfer_options copy_options = ABR_TRANSFER_OPTIONS_INIT;
      abr_transfer_options_init(&copy_options, ABR_TRANSFER_OPTIONS_VERSION);
      copy_options.copy = ABR_COPY_ALWAYS;
      const Options settled = settled_for_new_buffers(options, elements * 4);
      Result r{"to_device new buffer", "cpu", elements * 4};
      r.seconds = time_it(settled, [&] {
                    DLManagedTensorVersioned m = borrowed(view(src.data(), 1, shape, nullptr));
                    DLManagedTensorVersioned* out = nullptr;
                    check(abr_to_device(rt, &m, {kDLCPU, 0}, &copy_options, nullptr, &out), "abr_to_device");
                    out->deleter(out);
                  }).median_s;
      r.baselines.push_back(baseline("malloc+cp", time_it(settled, [&] {
                                                    void* p = std::malloc(elements * 4);
                                                    std::memcpy(p, src.data(), elements * 4);
                                                    keep(p);
                                                    std::free(p);
                                                  }).median_s));
      report(r);
    }

    if (selected(options, "batch") && elements * 4 <= (uint64_t{1} << 20))
      report(batch_result(rt, options, "batch", {kDLCPU, 0}, elements * 4));

    // Strided packs of float32 into a compact destination of `elements` floats.
    const uint64_t n = static_cast<uint64_t>(std::sqrt(static_cast<double>(elements)));
    const PackCase packs[] = {
        {"transpose pack", "transpose"}, {"step-2 slice pack", "slice"}, {"negative-stride pack", "reverse"}};
    for (const PackCase& pack : packs) {
      if (!selected(options, pack.name) || n < 2) continue;
      uint64_t rows = n, cols = n, source_elements = n * n;
      int ndim = 2;
      std::vector<int64_t> shape, strides;
      uint64_t offset = 0;
      if (std::strcmp(pack.numpy_kind, "transpose") == 0) {
        shape = {static_cast<int64_t>(n), static_cast<int64_t>(n)};
        strides = {1, static_cast<int64_t>(n)};
      } else if (std::strcmp(pack.numpy_kind, "slice") == 0) {
        source_elements = 2 * n * n;
        shape = {static_cast<int64_t>(n), static_cast<int64_t>(n)};
        strides = {static_cast<int64_t>(2 * n), 2};
      } else {
        ndim = 1, rows = n * n, cols = 1;
        shape = {static_cast<int64_t>(n * n)};
        strides = {-1};
        offset = (n * n - 1) * 4;
      }
      Buffer src(source_elements), dst(n * n);
      int64_t compact_shape[2] = {shape[0], ndim == 2 ? shape[1] : 1};
      DLTensor s = view(src.data(), ndim, shape.data(), strides.data(), offset);
      DLTensor d = view(dst.data(), ndim, compact_shape, nullptr);
      Result r{pack.name, "cpu", n * n * 4};
      if (ndim == 2) r.shape = std::to_string(n) + "x" + std::to_string(n);  // the 1-D reversal: its size says it
      r.seconds = time_it(options, [&] { check(abr_copy(rt, &s, &d, nullptr, nullptr), "abr_copy"); }).median_s;
      r.baselines.push_back(memcpy_baseline(options, dst.data(), src.data(), n * n * 4));
      r.baselines.push_back(numpy_pack_baseline(options, pack.numpy_kind, rows, cols));
      report(r);
    }
  }

  if (selected(options, "zero-copy round trip")) {
    progress("cpu", 0);
    float x[16] = {};
    int64_t shape[1] = {16};
    const int calls = 100000;
    Result r{"zero-copy round trip", "cpu", 0};
    r.unit = "ns";
    r.seconds = time_it(options,
                        [&] {
                          for (int i = 0; i < calls; ++i) {
                            DLManagedTensorVersioned m = borrowed(view(x, 1, shape, nullptr));
                            DLManagedTensorVersioned* out = nullptr;
                            check(abr_to_device(rt, &m, {kDLCPU, 0}, nullptr, nullptr, &out), "abr_to_device");
                            out->deleter(out);
                          }
                        })
                    .median_s /
        calls;
    report(r);
  }
}

}  // namespace bench
