#include <algorithm>
#include <cmath>

#include "bench/bench.hpp"

namespace bench {
namespace {

// A sample lasts about this long: one call of a 4 KiB copy (50-200 ns) is
// the clock's own resolution, and a median of 7 such single calls moved 2x
// between runs. Short calls are repeated inside a sample and averaged.
constexpr double kSampleSeconds = 1e-3;
constexpr int kMaxCallsPerSample = 10000;

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Timing time_it(const Options& options, const std::function<void()>& fn) {
  for (int i = 0; i < options.warmup; ++i) fn();
  const auto probe = std::chrono::steady_clock::now();
  fn();
  const double once = seconds_since(probe);
  const int calls = once >= kSampleSeconds
      ? 1
      : static_cast<int>(std::min<double>(kMaxCallsPerSample, std::ceil(kSampleSeconds / std::max(once, 1e-9))));
  std::vector<double> samples;
  for (int i = 0; i < options.repetitions; ++i) {
    const auto start = std::chrono::steady_clock::now();
    for (int call = 0; call < calls; ++call) fn();
    samples.push_back(seconds_since(start) / calls);
  }
  std::sort(samples.begin(), samples.end());
  return {samples[samples.size() / 2], samples.front()};
}

}  // namespace bench
