// Where a benchmark ran: written into its JSON so results from different
// machines (or commits) are never compared by mistake.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "bench/bench.hpp"

namespace bench {
namespace {

std::string first_line_of(const std::string& path, const std::string& prefix = "") {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (line.compare(0, prefix.size(), prefix) == 0) return line.substr(prefix.size());
  return "";
}

// The first line a command prints, or "".
std::string output_of(const char* command) {
  std::string text;
  if (FILE* pipe = popen(command, "r")) {
    char buffer[256];
    if (std::fgets(buffer, sizeof buffer, pipe)) text = buffer;
    pclose(pipe);
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

std::string quoted(const std::string& text) { return "\"" + json_escape(text) + "\""; }

// ARRAYBRIDGE_COMMIT (set by dev/gpu_check.sh for copies without .git), else git's.
std::string commit() {
  if (const char* given = std::getenv("ARRAYBRIDGE_COMMIT")) return given;
  const std::string head = output_of("git rev-parse HEAD 2>/dev/null");
  if (head.empty()) return "unknown";
  return head + (output_of("git status --porcelain --untracked-files=no 2>/dev/null").empty() ? "" : "+changes");
}

std::string backend_detail(abr_runtime* rt, abr_backend backend) {
  struct abr_backend_info info {};
  return abr_backend_info(rt, backend, &info) == ABR_OK ? info.detail : "";
}

}  // namespace

std::string machine_json(abr_runtime* rt) {
  std::string cpu = first_line_of("/proc/cpuinfo", "model name\t: ");
  std::string json = "{\"cpu\": " + quoted(cpu.empty() ? "unknown" : cpu) +
      ", \"cores\": " + std::to_string(std::thread::hardware_concurrency()) + ", \"commit\": " + quoted(commit()) +
      ", \"cuda\": " + quoted(backend_detail(rt, ABR_BACKEND_CUDA)) +
      ", \"opencl\": " + quoted(backend_detail(rt, ABR_BACKEND_OPENCL)) +
      ", \"nvidia_driver\": " + quoted(first_line_of("/proc/driver/nvidia/version")) + ", \"devices\": [";
  int32_t count = 0;
  abr_device_count(rt, &count);
  for (int32_t i = 0; i < count; ++i) {
    struct abr_device_info info {};
    if (abr_device_info(rt, i, &info) != ABR_OK) continue;
    json += std::string(i ? ", " : "") + "{\"device\": " + quoted(device_name(info.device)) +
        ", \"name\": " + quoted(info.name) + ", \"platform\": " + quoted(info.platform) + "}";
  }
  return json + "]}";
}

}  // namespace bench
