// arraybridge-bench: prints a table of libarraybridge beside its baselines and
// writes the full results as JSON. Ratios are baseline time / our time on the
// same bytes in the same run: above 1 means libarraybridge is faster.
//
// Everything the command line asks for is checked before any buffer is filled:
// options, sizes against free memory, --case and --device against what exists,
// and that the --json file can be written.
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <algorithm>
#include <string>

#include "bench/bench.hpp"

namespace {

const char* kUsage =
    "usage: arraybridge-bench [--quick] [--sizes LIST] [--case TEXT] [--device TEXT] [--reps N]\n"
    "                         [--json FILE] [--python PATH]\n"
    "  --quick        a short sweep (4K, 64K, 1M, 16M, 64M; 5 repetitions)\n"
    "  --sizes LIST   comma-separated sizes: a whole number of bytes with an optional K, M or G\n"
    "                 (powers of 1024), e.g. 4K,1M,256M; at least 4 (default 4K..1G by powers of 4)\n"
    "  --case TEXT    only cases whose name contains TEXT, or any part of TEXT,TEXT,...\n"
    "                 (the table's first column)\n"
    "  --device TEXT  only devices whose name contains TEXT (cpu, opencl:0, cuda:0, ...)\n"
    "  --reps N       timed repetitions per measurement, 1 to 10000 (default 7; the median is reported)\n"
    "  --json FILE    write every result as JSON (checked for writing before the run)\n"
    "  --python PATH  Python for the NumPy baselines and the package's case\n"
    "                 (default .venv/bin/python if present, else python3)\n"
    "  -h, --help     this text\n";

[[noreturn]] void usage_error(const std::string& message) {
  std::fprintf(stderr, "arraybridge-bench: %s\n%s", message.c_str(), kUsage);
  std::exit(2);
}

[[noreturn]] void input_error(const std::string& message) {
  std::fprintf(stderr, "arraybridge-bench: %s\n", message.c_str());
  std::exit(2);
}

// "4K", "16M", "1G", "4096", "1KiB": whole numbers only, so "0.5K" and "12KB" are refused.
uint64_t parse_size(const std::string& text) {
  std::size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  const std::string suffix = text.substr(digits);
  uint64_t scale = 0;
  if (suffix.empty())
    scale = 1;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB")
    scale = 1ull << 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB")
    scale = 1ull << 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB")
    scale = 1ull << 30;
  if (digits == 0 || scale == 0)
    usage_error("bad size '" + text + "': write a whole number of bytes with an optional K, M or G, e.g. 64K");
  // Checked digit by digit: a size that does not fit in 64 bits once scaled must be
  // refused, not wrapped (17179869185G wrapped to exactly 1 GiB and ran).
  uint64_t count = 0;
  for (std::size_t i = 0; i < digits; ++i) {
    const uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (count > (UINT64_MAX - digit) / 10 || (count = count * 10 + digit) > UINT64_MAX / scale)
      usage_error("bad size '" + text + "': more than 2^64 bytes (the largest is 18446744073709551615)");
  }
  const uint64_t value = count * scale;
  if (value < 4) usage_error("bad size '" + text + "': the smallest size is 4 bytes (one float32)");
  return value;
}

int parse_reps(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end || errno || value < 1 || value > 10000)
    usage_error("bad --reps '" + text + "': a whole number from 1 to 10000");
  return static_cast<int>(value);
}

std::string human_bytes(uint64_t bytes) {
  char text[32];
  if (bytes >= (1ull << 30))
    std::snprintf(text, sizeof text, "%.1f GiB", bytes / double(1ull << 30));
  else if (bytes >= (1ull << 20))
    std::snprintf(text, sizeof text, "%.1f MiB", bytes / double(1ull << 20));
  else
    std::snprintf(text, sizeof text, "%.1f KiB", bytes / 1024.0);
  return text;
}

// Three significant digits at most, never "0.00": 1467 GB/s, 52.3 GB/s, 380 MB/s, 170 ns, 35.5 us.
std::string rate(const bench::Result& r, double seconds) {
  char text[48];
  if (r.unit == "ns") {
    const double ns = seconds * 1e9;
    if (ns >= 1e6)
      std::snprintf(text, sizeof text, "%.1f ms", ns / 1e6);
    else if (ns >= 1e4)
      std::snprintf(text, sizeof text, "%.1f us", ns / 1e3);
    else
      std::snprintf(text, sizeof text, "%.0f ns", ns);
  } else {
    // The unit that puts the figure at 1 or more, so it fits its column however slow a
    // run was (a loaded machine once gave "0.00089 GB/s", one column too wide).
    double value = r.bytes / seconds;
    const char* unit = "B/s";
    for (const char* larger : {"KB/s", "MB/s", "GB/s"}) {
      if (value < 1000) break;
      value /= 1000, unit = larger;
    }
    std::snprintf(text, sizeof text, value >= 100 ? "%.0f %s" : value >= 10 ? "%.1f %s" : "%.2f %s", value, unit);
  }
  return text;
}

// Two significant digits below 0.1 (0.0031x), one below 0.001 (0.0009x: 7 columns, the
// cell's), two decimals up to 100, then whole numbers.
std::string ratio_text(double ratio) {
  char text[32];
  std::snprintf(text, sizeof text,
                ratio >= 100         ? "%.0fx"
                    : ratio >= 0.1   ? "%.2fx"
                    : ratio >= 0.001 ? "%.2gx"
                                     : "%.1gx",
                ratio);
  return text;
}

// Columns: case, device, size, shape, arraybridge, then one "label ratio" cell per
// baseline; two baselines fit in 100 columns. On a terminal narrower than that, a
// narrow layout fits 72: the shape (when there is one) stands in the size column,
// and each baseline after the first goes on a line of its own below.
constexpr const char* kRowFormat = "%-20s %-8s %-8s %-11s %11s";
constexpr const char* kNarrowRowFormat = "%-20s %-8s %-11s %11s";
constexpr const char* kCellFormat = "  %-9s %7s";

std::size_t table_width() {
  static const std::size_t width = [] {
    winsize size{};
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0 && size.ws_col < 100)
      return static_cast<std::size_t>(std::max<unsigned short>(size.ws_col, 72));
    return std::size_t{100};
  }();
  return width;
}
bool narrow() { return table_width() < 100; }

void print_header() {
  if (narrow())
    std::printf(kNarrowRowFormat, "case", "device", "size/shape", "arraybridge");
  else
    std::printf(kRowFormat, "case", "device", "size", "shape", "arraybridge");
  std::printf(kCellFormat, "baseline", "ratio");
  if (!narrow()) std::printf(kCellFormat, "baseline", "ratio");
  std::printf("\n");
}

void print_row(const bench::Result& r) {
  const uint64_t size = r.size_bytes ? r.size_bytes : r.bytes;
  const std::string size_text = size ? human_bytes(size) : "-";
  if (narrow())
    std::printf(kNarrowRowFormat, r.name.c_str(), r.device.c_str(),
                r.shape.empty() ? size_text.c_str() : r.shape.c_str(), rate(r, r.seconds).c_str());
  else
    std::printf(kRowFormat, r.name.c_str(), r.device.c_str(), size_text.c_str(), r.shape.c_str(),
                rate(r, r.seconds).c_str());
  for (std::size_t i = 0; i < r.baselines.size(); ++i) {
    const bench::Baseline& b = r.baselines[i];
    if (i > 0 && narrow()) std::printf("\n%*s", 53, "");
    std::printf(kCellFormat, b.label.c_str(), b.seconds > 0 ? ratio_text(b.seconds / r.seconds).c_str() : "n/a");
    if (b.seconds <= 0) bench::note(b.label + " not measured: " + b.note);
  }
  std::printf("\n");
}

// lead + text, cut at spaces into lines of at most the table's width, each further line
// indented as deep as `more` (4 columns by default, or under the text after a label).
void print_wrapped(const std::string& text, std::string lead = "  ", std::size_t more = 4) {
  const std::size_t width = table_width();
  std::string rest = text;
  while (lead.size() + rest.size() > width) {
    std::size_t cut = rest.rfind(' ', width - lead.size());
    if (cut == std::string::npos || cut == 0) cut = width - lead.size();
    std::printf("%s%s\n", lead.c_str(), rest.substr(0, cut).c_str());
    rest = rest.substr(rest[cut] == ' ' ? cut + 1 : cut);
    lead.assign(more, ' ');
  }
  std::printf("%s%s\n", lead.c_str(), rest.c_str());
}

// "  label      text" under a column of labels `column` wide, wrapped under the text.
void print_labelled(const std::string& label, std::size_t column, const std::string& text) {
  std::string lead = "  " + label;
  lead.resize(std::max(lead.size(), column + 2), ' ');
  lead += ' ';
  print_wrapped(text, lead, column + 3);
}

// Under the table: what each baseline is, each case's target, and the notes.
void print_legend(const std::vector<bench::Result>& results) {
  std::vector<std::string> labels, cases;
  for (const bench::Result& r : results) {
    if (std::find(cases.begin(), cases.end(), r.name) == cases.end()) cases.push_back(r.name);
    for (const bench::Baseline& b : r.baselines)
      if (std::find(labels.begin(), labels.end(), b.label) == labels.end()) labels.push_back(b.label);
  }
  if (!results.empty()) {
    std::printf("\n");
    print_wrapped(
        "ratio = baseline time / arraybridge time (above 1: arraybridge is faster); H2D = host to "
        "device, D2H = device to host; each time is the median of the repetitions (a row's CUDA driver or "
        "Python peer baseline timed in turn with it).");
    std::printf("baselines:\n");
    for (const std::string& label : labels) print_labelled(label, 10, bench::baseline_info(label).name);
    bool any_target = false;
    for (const std::string& name : cases) {
      const char* target = bench::find_case(name)->target;
      if (!*target) continue;
      if (!any_target) std::printf("targets:\n");
      any_target = true;
      print_labelled(name, 20, target);
    }
  }
  if (!bench::notes().empty()) {
    std::printf("notes:\n");
    for (const std::string& n : bench::notes()) print_wrapped(n);
  }
}

struct Device {
  std::string name;
  DLDevice device;
  uint32_t flags;
  uint64_t memory_bytes;
};

bool runs_on(const bench::CaseInfo& c, const Device& d) {
  switch (c.where) {
    case bench::Where::Cpu: return d.device.device_type == kDLCPU;
    case bench::Where::OpenCl: return d.device.device_type == kDLOpenCL;
    case bench::Where::OpenClSharing:
      return d.device.device_type == kDLOpenCL && (d.flags & ABR_DEVICE_SHARES_HOST_MEMORY);
    case bench::Where::Cuda: return d.device.device_type == kDLCUDA;
  }
  return false;
}

uint64_t available_host_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (meminfo >> key >> kib) {
    if (key == "MemAvailable:") return kib * 1024;
    meminfo.ignore(256, '\n');
  }
  return 0;  // unknown: not checked
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

void write_json(std::ofstream& out, const bench::Options& options, const std::string& machine,
                const std::vector<bench::Result>& results) {
  using bench::json_escape;
  out << "{\n  \"tool\": \"arraybridge-bench\",\n  \"library_version\": \"" << abr_version_string()
      << "\",\n  \"repetitions\": " << options.repetitions << ",\n  \"statistic\": \"median\",\n"
      << "  \"bytes_counted\": \"once (bytes written to the destination)\",\n  \"machine\": " << machine
      << ",\n  \"results\": [\n";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const bench::Result& r = results[i];
    out << "    {\"case\": \"" << json_escape(r.name) << "\", \"device\": \"" << r.device
        << "\", \"bytes\": " << r.bytes << ", \"size_bytes\": " << (r.size_bytes ? r.size_bytes : r.bytes)
        << ", \"shape\": \"" << r.shape << "\", \"unit\": \"" << r.unit << "\", \"seconds\": " << r.seconds;
    if (r.unit != "ns") out << ", \"gbps\": " << r.bytes / r.seconds / 1e9;
    out << ", \"baselines\": [";
    for (std::size_t j = 0; j < r.baselines.size(); ++j) {
      const bench::Baseline& b = r.baselines[j];
      out << (j ? ", " : "") << "{\"label\": \"" << json_escape(b.label) << "\", \"name\": \"" << json_escape(b.name)
          << "\", ";
      if (b.seconds > 0)
        out << "\"seconds\": " << b.seconds << ", \"ratio\": " << b.seconds / r.seconds << "}";
      else
        out << "\"unavailable\": \"" << json_escape(b.note) << "\"}";
    }
    out << "]}" << (i + 1 < results.size() ? "," : "") << "\n";
  }
  out << "  ]\n}\n";
}

// "4K,1M" -> {"4K", "1M"}; an empty part is kept, for the option to refuse in its words.
std::vector<std::string> comma_parts(const std::string& text) {
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const std::size_t comma = text.find(',', start);
    parts.push_back(text.substr(start, comma - start));
    if (comma == std::string::npos) return parts;
    start = comma + 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  bench::Options options;
  std::string json_path;
  bool python_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage_error(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (arg == "--quick") {
      options.sizes = {4ull << 10, 64ull << 10, 1ull << 20, 16ull << 20, 64ull << 20}, options.repetitions = 5;
    } else if (arg == "--sizes") {
      options.sizes.clear();
      for (const std::string& part : comma_parts(value())) options.sizes.push_back(parse_size(part));
    } else if (arg == "--case") {
      options.case_filter = value();
      options.case_parts = comma_parts(options.case_filter);  // "pack,host copy": each a piece of a case's name
      for (const std::string& part : options.case_parts)
        if (part.empty()) usage_error("--case '" + options.case_filter + "' has an empty part");
    } else if (arg == "--device") {
      options.device_filter = value();
    } else if (arg == "--reps") {
      options.repetitions = parse_reps(value());
    } else if (arg == "--json") {
      json_path = value();
    } else if (arg == "--python") {
      options.python = value(), python_given = true;
    } else if (!arg.empty() && arg[0] == '-') {
      usage_error("unknown option '" + arg + "'");
    } else {
      usage_error("unexpected argument '" + arg + "'");
    }
  }
  if (options.sizes.empty())
    for (uint64_t s = 4096; s <= (1ull << 30); s *= 4) options.sizes.push_back(s);
  if (!python_given && access(".venv/bin/python", X_OK) == 0) options.python = ".venv/bin/python";

  // The cases --case names.
  std::vector<const bench::CaseInfo*> cases;
  std::vector<std::string> case_names;
  for (const bench::CaseInfo* c : bench::all_cases()) {
    case_names.push_back(c->name);
    if (bench::selected(options, c->name)) cases.push_back(c);
  }
  if (cases.empty())
    input_error("no case matches --case '" + options.case_filter + "'; the cases: " + join(case_names));

  // The devices --device names (all of them, lost or not: the table should say).
  abr_runtime* rt = nullptr;
  if (abr_runtime_create(nullptr, &rt) != ABR_OK) {
    std::fprintf(stderr, "arraybridge-bench: %s\n", abr_last_error());
    return 1;
  }
  int32_t count = 0;
  bench::check(abr_device_count(rt, &count), "abr_device_count");
  std::vector<Device> devices;
  std::vector<std::string> device_names;
  for (int32_t i = 0; i < count; ++i) {
    struct abr_device_info info = ABR_DEVICE_INFO_INIT;
    bench::check(abr_device_info(rt, i, &info), "abr_device_info");
    if (info.device.device_type != kDLCPU && info.device.device_type != kDLOpenCL && info.device.device_type != kDLCUDA)
      continue;  // cuda_host: measured as the pinned side of the CUDA cases
    const Device d{bench::device_name(info.device), info.device, info.flags, info.memory_bytes};
    device_names.push_back(d.name);
    if (bench::device_selected(options, info.device)) devices.push_back(d);
  }
  if (devices.empty()) {
    abr_runtime_destroy(rt);
    input_error("no device matches --device '" + options.device_filter + "'; the devices here: " + join(device_names));
  }

  // The rows to come, for the progress line; none is an error that says why.
  int rows = 0;
  uint64_t weight = 0, largest = 0;
  for (uint64_t s : options.sizes) largest = std::max(largest, s);
  bool wants_cuda = false;
  for (const bench::CaseInfo* c : cases) {
    wants_cuda |= c->where == bench::Where::Cuda;
    for (const Device& d : devices) {
      if (!runs_on(*c, d)) continue;
      if (c->sweep) {
        rows += static_cast<int>(bench::sweep_threads().size());
        weight += bench::sweep_threads().size() * bench::row_weight(largest);
        continue;
      }
      for (uint64_t s : c->per_size ? options.sizes : std::vector<uint64_t>{0}) ++rows, weight += bench::row_weight(s);
    }
  }
  struct abr_backend_info cuda = ABR_BACKEND_INFO_INIT;
  bench::check(abr_backend_info(rt, ABR_BACKEND_CUDA, &cuda), "abr_backend_info");
  wants_cuda &= bench::device_selected(options, {kDLCUDA, 0});
  if (wants_cuda && !cuda.available) bench::note(std::string("no CUDA cases: ") + cuda.detail);
  if (rows == 0) {
    abr_runtime_destroy(rt);
    std::vector<std::string> selected_devices;
    for (const Device& d : devices) selected_devices.push_back(d.name);
    input_error("no case matching --case '" + options.case_filter + "' runs on " + join(selected_devices) +
                (wants_cuda && !cuda.available ? std::string(" (") + cuda.detail + ")" : std::string()));
  }

  // Memory: the host holds up to five buffers of the largest size at once (source,
  // destination, and on a CPU OpenCL device its buffers too); a device up to three.
  const uint64_t host_free = available_host_memory();
  if (host_free && largest > host_free / 5) {
    abr_runtime_destroy(rt);
    input_error("size " + human_bytes(largest) + " needs about " + human_bytes(5 * largest) +
                " of host memory for its buffers; " + human_bytes(host_free) + " is available here");
  }
  for (const Device& d : devices) {
    if (d.device.device_type != kDLCPU && d.memory_bytes && largest > d.memory_bytes / 3) {
      abr_runtime_destroy(rt);
      input_error("size " + human_bytes(largest) + " needs about " + human_bytes(3 * largest) + " on " + d.name +
                  ", which has " + human_bytes(d.memory_bytes) + " (leave it out with --device or smaller --sizes)");
    }
  }

  std::ofstream json;
  if (!json_path.empty()) {
    json.open(json_path);
    if (!json) {
      abr_runtime_destroy(rt);
      input_error("cannot write --json " + json_path + ": " + std::strerror(errno));
    }
  }

  std::vector<bench::Result> results;
  print_header();
  bench::progress_plan(rows, weight);
  const bench::Report report = [&](const bench::Result& r) {
    if (!bench::find_case(r.name)) {
      std::fprintf(stderr, "arraybridge-bench: internal error: case '%s' is not in the catalog\n", r.name.c_str());
      std::abort();
    }
    bench::progress_clear();
    print_row(r);
    std::fflush(stdout);
    results.push_back(r);
    bench::progress_row_done(bench::row_weight(r.size_bytes ? r.size_bytes : r.bytes));
    bench::progress_resume();
  };
  bench::run_host_cases(rt, options, report);
  bench::run_opencl_cases(rt, options, report);
  bench::run_cuda_cases(rt, options, report);
  bench::run_python_cases(options, report);
  bench::run_python_convert_cases(options, report);
  bench::run_python_ray_cases(options, report);
  bench::run_python_host_copy_cases(options, report);
  bench::run_python_nixl_cases(options, report);
  bench::run_python_staging_cases(options, report);
  bench::run_python_gpu_batch_cases(options, report);
  bench::run_process_cases(options, report);
  bench::progress_clear();
  print_legend(results);
  const std::string machine = bench::machine_json(rt);
  abr_runtime_destroy(rt);

  if (json.is_open()) {
    write_json(json, options, machine, results);
    json.close();
    if (!json) {
      std::fprintf(stderr, "arraybridge-bench: cannot write %s\n", json_path.c_str());
      return 1;
    }
  }
  return 0;
}
