#include <algorithm>

#include "bench/bench.hpp"

namespace bench {

Timing time_it(const Options& options, const std::function<void()>& fn) {
  for (int i = 0; i < options.warmup; ++i) fn();
  std::vector<double> samples;
  for (int i = 0; i < options.repetitions; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    samples.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(samples.begin(), samples.end());
  return {samples[samples.size() / 2], samples.front()};
}

}  // namespace bench
