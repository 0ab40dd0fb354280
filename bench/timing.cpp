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

// How many calls make one sample of `fn` (one call, after the warm-up, timed).
int calls_per_sample(const Options& options, const std::function<void()>& fn) {
  for (int i = 0; i < options.warmup; ++i) fn();
  const auto probe = std::chrono::steady_clock::now();
  fn();
  const double once = seconds_since(probe);
  return once >= kSampleSeconds
      ? 1
      : static_cast<int>(std::min<double>(kMaxCallsPerSample, std::ceil(kSampleSeconds / std::max(once, 1e-9))));
}

double sample(const std::function<void()>& fn, int calls) {
  const auto start = std::chrono::steady_clock::now();
  for (int call = 0; call < calls; ++call) fn();
  return seconds_since(start) / calls;
}

Timing summary(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return {samples[samples.size() / 2], samples.front()};
}

}  // namespace

Timing time_it(const Options& options, const std::function<void()>& fn) {
  const int calls = calls_per_sample(options, fn);
  std::vector<double> samples;
  for (int i = 0; i < options.repetitions; ++i) samples.push_back(sample(fn, calls));
  return summary(std::move(samples));
}

std::vector<Timing> time_together(const Options& options, const std::vector<std::function<void()>>& fns) {
  std::vector<int> calls;
  for (const auto& fn : fns) calls.push_back(calls_per_sample(options, fn));
  std::vector<std::vector<double>> samples(fns.size());
  for (int round = 0; round < options.repetitions; ++round)
    for (std::size_t k = 0; k < fns.size(); ++k) {
      const std::size_t i = round % 2 ? fns.size() - 1 - k : k;  // ABBA: a drift in time favours no one
      samples[i].push_back(sample(fns[i], calls[i]));
    }
  std::vector<Timing> timings;
  for (std::vector<double>& each : samples) timings.push_back(summary(std::move(each)));
  return timings;
}

}  // namespace bench
