// What the soak samples, how it judges growth, and its reports (text and JSON).
#pragma once

#include <arraybridge/arraybridge.h>

#include <cstdint>
#include <string>
#include <vector>

namespace soak {

// The figures sampled, in this order, each with the largest slope per 10^5
// transfers after warm-up that still counts as flat (justified in samples.cpp).
struct Figure {
  const char* name;
  const char* unit;
  double threshold;
};
extern const Figure kFigures[];
constexpr int kFigureCount = 6;

struct Sample {
  uint64_t transfers;
  double seconds;
  double values[kFigureCount];
};

struct Slope {
  double per_1e5;  // least squares, over the samples after warm-up
  double first, last, low, high;
  bool flat;
};

struct Verdict {
  uint64_t warm_up;  // samples before this many transfers are not judged
  Slope slopes[kFigureCount];
  bool flat;
  std::string why;  // "" when flat, else what grew
};

struct Machine {
  std::string cpu, commit;
  int cores = 0;
  std::vector<std::string> devices, missing;
};

struct Summary {
  uint64_t asked;
  int threads;
  uint64_t sample_every, transfers;
  double seconds;
  std::vector<std::string> errors, kinds;
};

class Samples {
 public:
  // Samples the process and `rt` now, after `transfers` transfers.
  void add(uint64_t transfers, double seconds, abr_runtime* rt);
  Verdict judge(uint64_t transfers) const;
  const std::vector<Sample>& all() const { return samples_; }

 private:
  std::vector<Sample> samples_;
  uint64_t pool_limit_ = 0, cache_limit_ = 0;
};

std::string text_report(const Machine& machine, const Summary& summary, const Samples& samples, const Verdict& verdict);
std::string json_report(const Machine& machine, const Summary& summary, const Samples& samples, const Verdict& verdict);

}  // namespace soak
