#include "tests/soak/samples.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "bench/machine.hpp"
#include "tests/support/process.hpp"

namespace soak {

// Thresholds, per 10^5 transfers after warm-up:
//  - resident memory apart from the pool and the device cache (judged on their
//    own; with the fake driver device memory is host memory) 1 MiB: a leak of
//    one small object (16 bytes) per transfer is 1.6 MB per 10^5 and fails;
//  - descriptors and threads 0.5: one leaked per 10^5 transfers is a slope of 1
//    (samples are taken with every worker parked between steps, so counts are exact);
//  - the pinned pool, the device cache, and all resident memory 4 MiB, and the
//    caches never above their limits: they keep blocks by size class and grow in
//    steps when 8 threads happen to need more at once (up to 2 MiB per 10^5 seen
//    in the first 2 x 10^5 transfers), while one 64 KiB block leaked per 1000
//    transfers is 6.4 MiB per 10^5.
const Figure kFigures[kFigureCount] = {
    {"rss_other_bytes", "bytes", 1 << 20},   {"open_fds", "descriptors", 0.5},         {"threads", "threads", 0.5},
    {"pool_bytes_pinned", "bytes", 4 << 20}, {"device_cache_bytes", "bytes", 4 << 20}, {"rss_bytes", "bytes", 4 << 20}};

namespace {

double status_field(const char* field) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind(field, 0) == 0) return std::atof(line.c_str() + std::string(field).size());
  return -1;
}

Slope slope_of(const std::vector<Sample>& samples, int figure, uint64_t warm_up) {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  Slope s{0, 0, 0, 0, 0, true};
  bool any = false;
  for (const Sample& sample : samples) {
    if (sample.transfers < warm_up) continue;
    const double x = static_cast<double>(sample.transfers) / 1e5, y = sample.values[figure];
    if (!any) s.first = s.low = s.high = y;
    any = true;
    s.last = y;
    s.low = std::min(s.low, y);
    s.high = std::max(s.high, y);
    n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  const double spread = n * sxx - sx * sx;
  s.per_1e5 = spread > 0 ? (n * sxy - sx * sy) / spread : 0;
  s.flat = s.per_1e5 < kFigures[figure].threshold;
  return s;
}

std::string quoted(const std::string& text) { return "\"" + bench::json_escape(text) + "\""; }

std::string number(double value) {
  char text[64];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

std::string list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + quoted(items[i]);
  return out + "]";
}

}  // namespace

void Samples::add(uint64_t transfers, double seconds, abr_runtime* rt) {
  abr_pool_stats pool = ABR_POOL_STATS_INIT, cache = ABR_POOL_STATS_INIT;
  abr_pool_get_stats(rt, &pool);
  abr_device_cache_get_stats(rt, &cache);
  pool_limit_ = pool.limit_bytes;
  cache_limit_ = cache.limit_bytes;
  const double rss = status_field("VmRSS:") * 1024, pinned = static_cast<double>(pool.bytes_pinned),
               cached = static_cast<double>(cache.bytes_pinned);
  samples_.push_back({transfers,
                      seconds,
                      {rss - pinned - cached, static_cast<double>(test::open_descriptors()), status_field("Threads:"),
                       pinned, cached, rss}});
}

Verdict Samples::judge(uint64_t transfers) const {
  Verdict v{transfers / 5, {}, true, ""};
  int judged = 0;
  for (const Sample& sample : samples_) judged += sample.transfers >= v.warm_up;
  if (judged < 3) {
    v.flat = false;
    v.why = "fewer than 3 samples after warm-up: sample more often";
  }
  for (int f = 0; f < kFigureCount; ++f) {
    Slope& s = v.slopes[f];
    s = slope_of(samples_, f, v.warm_up);
    const uint64_t limit = f == 3 ? pool_limit_ : f == 4 ? cache_limit_ : 0;
    if (limit && s.high > static_cast<double>(limit)) s.flat = false;
    if (!s.flat) {
      v.flat = false;
      v.why += std::string(v.why.empty() ? "" : "; ") + kFigures[f].name + " grows " + number(s.per_1e5) + " " +
          kFigures[f].unit + " per 10^5 transfers (threshold " + number(kFigures[f].threshold) + ")";
    }
  }
  return v;
}

std::string text_report(const Machine& machine, const Summary& summary, const Samples& samples,
                        const Verdict& verdict) {
  std::ostringstream out;
  out << "arraybridge soak: " << summary.transfers << " transfers on " << summary.threads << " threads in "
      << number(summary.seconds) << " s: " << number(summary.transfers / std::max(summary.seconds, 1e-9))
      << " transfers/s\n";
  out << "machine: " << machine.cpu << ", " << machine.cores << " cores; commit " << machine.commit << "\n";
  for (const std::string& d : machine.devices) out << "device: " << d << "\n";
  for (const std::string& m : machine.missing) out << "not available: " << m << "\n";
  out << "work: ";
  for (std::size_t k = 0; k < summary.kinds.size(); ++k) out << (k ? ", " : "") << summary.kinds[k];
  out << " (each on every device in turn)\n\n";
  char line[256];
  std::snprintf(line, sizeof line, "%10s %8s %10s %5s %7s %12s %12s %10s\n", "transfers", "seconds", "other_MiB", "fds",
                "threads", "pool_MiB", "dcache_MiB", "rss_MiB");
  out << line;
  for (const Sample& s : samples.all()) {
    std::snprintf(line, sizeof line, "%10llu %8.1f %10.1f %5.0f %7.0f %12.2f %12.2f %10.1f\n",
                  static_cast<unsigned long long>(s.transfers), s.seconds, s.values[0] / 1048576, s.values[1],
                  s.values[2], s.values[3] / 1048576, s.values[4] / 1048576, s.values[5] / 1048576);
    out << line;
  }
  out << "\nslopes per 10^5 transfers after warm-up (from " << verdict.warm_up << " transfers):\n";
  for (int f = 0; f < kFigureCount; ++f) {
    const Slope& s = verdict.slopes[f];
    std::snprintf(line, sizeof line, "  %-20s %12s %-11s (threshold %s; %s .. %s) %s\n", kFigures[f].name,
                  number(s.per_1e5).c_str(), kFigures[f].unit, number(kFigures[f].threshold).c_str(),
                  number(s.low).c_str(), number(s.high).c_str(), s.flat ? "flat" : "GROWS");
    out << line;
  }
  for (const std::string& e : summary.errors) out << "error: " << e << "\n";
  if (summary.transfers < summary.asked)
    out << "stopped early: " << summary.transfers << " of " << summary.asked << "\n";
  out << (verdict.flat && summary.errors.empty()
              ? "verdict: every figure flat, every value right\n"
              : "verdict: FAILED" + (verdict.why.empty() ? "" : ": " + verdict.why) + "\n");
  return out.str();
}

std::string json_report(const Machine& machine, const Summary& summary, const Samples& samples,
                        const Verdict& verdict) {
  std::ostringstream out;
  out << "{\n  \"machine\": {\"cpu\": " << quoted(machine.cpu) << ", \"cores\": " << machine.cores
      << ", \"commit\": " << quoted(machine.commit) << ", \"devices\": " << list(machine.devices)
      << ", \"not_available\": " << list(machine.missing) << "},\n";
  out << "  \"run\": {\"transfers_asked\": " << summary.asked << ", \"transfers\": " << summary.transfers
      << ", \"threads\": " << summary.threads << ", \"sample_every\": " << summary.sample_every
      << ", \"seconds\": " << number(summary.seconds)
      << ", \"transfers_per_second\": " << number(summary.transfers / std::max(summary.seconds, 1e-9))
      << ", \"work\": " << list(summary.kinds) << ", \"errors\": " << list(summary.errors) << "},\n";
  out << "  \"samples\": [\n";
  const auto& all = samples.all();
  for (std::size_t i = 0; i < all.size(); ++i) {
    out << "    {\"transfers\": " << all[i].transfers << ", \"seconds\": " << number(all[i].seconds);
    for (int f = 0; f < kFigureCount; ++f) out << ", " << quoted(kFigures[f].name) << ": " << number(all[i].values[f]);
    out << "}" << (i + 1 < all.size() ? "," : "") << "\n";
  }
  out << "  ],\n  \"warm_up_transfers\": " << verdict.warm_up << ",\n  \"slopes_per_1e5_transfers\": {\n";
  for (int f = 0; f < kFigureCount; ++f) {
    const Slope& s = verdict.slopes[f];
    out << "    " << quoted(kFigures[f].name) << ": {\"slope\": " << number(s.per_1e5)
        << ", \"threshold\": " << number(kFigures[f].threshold) << ", \"low\": " << number(s.low)
        << ", \"high\": " << number(s.high) << ", \"flat\": " << (s.flat ? "true" : "false") << "}"
        << (f + 1 < kFigureCount ? "," : "") << "\n";
  }
  out << "  },\n  \"flat\": " << (verdict.flat ? "true" : "false")
      << ",\n  \"passed\": " << (verdict.flat && summary.errors.empty() ? "true" : "false") << "\n}\n";
  return out.str();
}

}  // namespace soak
