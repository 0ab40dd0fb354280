// arraybridge-bench: prints a table of libarraybridge beside its baselines and
// writes the full results as JSON. Ratios are baseline time / our time on the
// same bytes in the same run: above 1 means libarraybridge is faster.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <unistd.h>

#include "bench.hpp"

namespace {

const char* kUsage =
    "usage: arraybridge-bench [--quick] [--sizes LIST] [--case TEXT] [--device TEXT] [--reps N] [--json FILE]\n"
    "                         [--python PATH]\n"
    "  --quick        a short sweep (1 MiB, 16 MiB, 64 MiB)\n"
    "  --sizes LIST   comma-separated sizes, e.g. 4K,1M,256M (default 4K..1G by powers of 4)\n"
    "  --case TEXT    only cases whose name contains TEXT\n"
    "  --device TEXT  only devices whose name contains TEXT (cpu, opencl:0, ...)\n"
    "  --reps N       timed repetitions per measurement (default 7; the median is reported)\n"
    "  --json FILE    write every result as JSON\n"
    "  --python PATH  Python used for the NumPy baselines (default .venv/bin/python if present, else python3)\n";

uint64_t parse_size(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  uint64_t scale = 1;
  if (end && *end) {
    switch (*end) {
      case 'K': case 'k': scale = 1ull << 10; break;
      case 'M': case 'm': scale = 1ull << 20; break;
      case 'G': case 'g': scale = 1ull << 30; break;
      default: scale = 0;
    }
  }
  if (value <= 0 || scale == 0) {
    std::fprintf(stderr, "arraybridge-bench: bad size '%s'\n%s", text.c_str(), kUsage);
    std::exit(2);
  }
  return static_cast<uint64_t>(value * static_cast<double>(scale));
}

std::string human_bytes(uint64_t bytes) {
  char text[32];
  if (bytes >= (1ull << 30)) std::snprintf(text, sizeof text, "%.1f GiB", bytes / double(1ull << 30));
  else if (bytes >= (1ull << 20)) std::snprintf(text, sizeof text, "%.1f MiB", bytes / double(1ull << 20));
  else std::snprintf(text, sizeof text, "%.1f KiB", bytes / 1024.0);
  return text;
}

std::string rate(const bench::Result& r, double seconds) {
  char text[48];
  if (r.unit == "ns") std::snprintf(text, sizeof text, "%.0f ns", seconds * 1e9);
  else std::snprintf(text, sizeof text, "%.2f GB/s", r.bytes / seconds / 1e9);
  return text;
}

}  // namespace

std::string bench::json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) out += ' ';
    else out += c;
  }
  return out;
}

using bench::json_escape;

int main(int argc, char** argv) {
  bench::Options options;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "arraybridge-bench: %s needs a value\n%s", arg.c_str(), kUsage);
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--quick") options.sizes = {1ull << 20, 16ull << 20, 64ull << 20}, options.repetitions = 5;
    else if (arg == "--sizes") {
      options.sizes.clear();
      std::string list = value();
      for (std::size_t start = 0; start <= list.size();) {
        const std::size_t comma = list.find(',', start);
        options.sizes.push_back(parse_size(list.substr(start, comma - start)));
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else if (arg == "--case") options.case_filter = value();
    else if (arg == "--device") options.device_filter = value();
    else if (arg == "--reps") options.repetitions = std::max(1, std::atoi(value().c_str()));
    else if (arg == "--json") json_path = value();
    else if (arg == "--python") options.python = value();
    else {
      std::fputs(kUsage, arg == "--help" ? stdout : stderr);
      return arg == "--help" ? 0 : 2;
    }
  }
  if (options.sizes.empty())
    for (uint64_t s = 4096; s <= (1ull << 30); s *= 4) options.sizes.push_back(s);
  if (options.python == "python3" && access(".venv/bin/python", X_OK) == 0) options.python = ".venv/bin/python";

  abr_runtime* rt = nullptr;
  if (abr_runtime_create(nullptr, &rt) != ABR_OK) {
    std::fprintf(stderr, "arraybridge-bench: %s\n", abr_last_error());
    return 1;
  }

  std::vector<bench::Result> results;
  std::printf("%-48s %-8s %-16s %-12s %s\n", "case", "device", "size", "arraybridge",
              "baselines (ratio = baseline time / arraybridge time)");
  const bench::Report report = [&](const bench::Result& r) {
    std::string size = r.bytes ? human_bytes(r.bytes) : "-";
    if (!r.shape.empty()) size += " " + r.shape;
    std::printf("%-48s %-8s %-16s %-12s", r.name.c_str(), r.device.c_str(), size.c_str(), rate(r, r.seconds).c_str());
    for (const bench::Baseline& b : r.baselines) {
      if (b.seconds > 0)
        std::printf("  %s %.2fx (%s)", b.name.c_str(), b.seconds / r.seconds, rate(r, b.seconds).c_str());
      else
        std::printf("  %s: %s", b.name.c_str(), b.note.c_str());
    }
    std::printf("\n");
    std::fflush(stdout);
    results.push_back(r);
  };
  bench::run_host_cases(rt, options, report);
  bench::run_opencl_cases(rt, options, report);
  bench::run_cuda_cases(rt, options, report);
  bench::run_python_cases(options, report);
  std::fprintf(stderr, "\r%-80s\r", "");
  const std::string machine = bench::machine_json(rt);
  abr_runtime_destroy(rt);

  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << "{\n  \"tool\": \"arraybridge-bench\",\n  \"library_version\": \"" << abr_version_string()
        << "\",\n  \"repetitions\": " << options.repetitions << ",\n  \"statistic\": \"median\",\n"
        << "  \"bytes_counted\": \"once (bytes written to the destination)\",\n  \"machine\": " << machine
        << ",\n  \"results\": [\n";
    for (std::size_t i = 0; i < results.size(); ++i) {
      const bench::Result& r = results[i];
      out << "    {\"case\": \"" << json_escape(r.name) << "\", \"device\": \"" << r.device << "\", \"bytes\": " << r.bytes
          << ", \"shape\": \"" << r.shape << "\", \"unit\": \"" << r.unit << "\", \"seconds\": " << r.seconds;
      if (r.unit != "ns") out << ", \"gbps\": " << r.bytes / r.seconds / 1e9;
      out << ", \"baselines\": [";
      for (std::size_t j = 0; j < r.baselines.size(); ++j) {
        const bench::Baseline& b = r.baselines[j];
        out << (j ? ", " : "") << "{\"name\": \"" << json_escape(b.name) << "\", ";
        if (b.seconds > 0) out << "\"seconds\": " << b.seconds << ", \"ratio\": " << b.seconds / r.seconds << "}";
        else out << "\"unavailable\": \"" << json_escape(b.note) << "\"}";
      }
      out << "]}" << (i + 1 < results.size() ? "," : "") << "\n";
    }
    out << "  ]\n}\n";
    if (!out) {
      std::fprintf(stderr, "arraybridge-bench: cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return 0;
}
