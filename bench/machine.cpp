// Where a benchmark or a soak ran (machine.hpp).
#include "bench/machine.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <utility>

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

std::string backend_detail(abr_runtime* rt, abr_backend backend) {
  struct abr_backend_info info = ABR_BACKEND_INFO_INIT;
  return abr_backend_info(rt, backend, &info) == ABR_OK ? info.detail : "";
}

}  // namespace

std::string cpu_model() {
  const std::string cpu = first_line_of("/proc/cpuinfo", "model name\t: ");
  return cpu.empty() ? "unknown" : cpu;
}

std::string checkout_commit() {
  if (const char* given = std::getenv("ARRAYBRIDGE_COMMIT")) return given;
  const std::string head = output_of("git rev-parse HEAD 2>/dev/null");
  if (head.empty()) return "unknown";
  return head + (output_of("git status --porcelain --untracked-files=no 2>/dev/null").empty() ? "" : "+changes");
}

std::string machine_json(abr_runtime* rt) {
  std::string json = "{\"cpu\": " + quoted(cpu_model()) +
      ", \"cores\": " + std::to_string(std::thread::hardware_concurrency()) +
      ", \"commit\": " + quoted(checkout_commit()) + ", \"cuda\": " + quoted(backend_detail(rt, ABR_BACKEND_CUDA)) +
      ", \"opencl\": " + quoted(backend_detail(rt, ABR_BACKEND_OPENCL)) +
      ", \"nvidia_driver\": " + quoted(first_line_of("/proc/driver/nvidia/version")) + ", \"devices\": [";
  int32_t count = 0;
  abr_device_count(rt, &count);
  const char* separator = "";
  for (int32_t i = 0; i < count; ++i) {
    struct abr_device_info info = ABR_DEVICE_INFO_INIT;
    if (abr_device_info(rt, i, &info) != ABR_OK) continue;
    char name[ABR_NAME_MAX] = "";
    abr_device_format(info.device, name, sizeof name);
    json += std::string(std::exchange(separator, ", ")) + "{\"device\": " + quoted(name) +
        ", \"name\": " + quoted(info.name) + ", \"platform\": " + quoted(info.platform) + "}";
  }
  return json + "]}";
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20)
      out += ' ';
    else
      out += c;
  }
  return out;
}

}  // namespace bench
