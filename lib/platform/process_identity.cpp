// Start times read from procfs (see process_identity.hpp).
#include "lib/platform/process_identity.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <string>

namespace abr {

std::optional<uint64_t> parse_start_time(std::string_view stat_line) {
  const std::size_t comm_end = stat_line.rfind(')');
  if (comm_end == std::string_view::npos) return std::nullopt;
  std::string_view rest = stat_line.substr(comm_end + 1);
  // Fields 3 (the state) to 22 follow the command name, one space before each.
  for (int field = 3; field <= 22; ++field) {
    if (rest.empty() || rest.front() != ' ') return std::nullopt;
    rest.remove_prefix(1);
    const std::size_t end = std::min(rest.find(' '), rest.size());
    if (field == 22) {
      uint64_t ticks = 0;
      const auto [last, error] = std::from_chars(rest.data(), rest.data() + end, ticks);
      if (error != std::errc() || last != rest.data() + end || end == 0) return std::nullopt;
      return ticks;
    }
    rest.remove_prefix(end);
  }
  return std::nullopt;
}

std::optional<uint64_t> process_start_time(int32_t pid) {
  if (pid <= 0) return std::nullopt;  // 0 and negative pids name groups, never one process
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  // The line is at most a few hundred bytes; a command name is 15 characters at most.
  char text[4096];
  std::size_t used = 0;
  for (ssize_t got = 1; got > 0 && used < sizeof text;) {
    got = read(fd, text + used, sizeof text - used);
    if (got > 0) used += static_cast<std::size_t>(got);
    if (got < 0 && errno == EINTR) got = 1;  // interrupted by a signal: read on
  }
  close(fd);
  return parse_start_time(std::string_view(text, used));
}

double seconds_after_boot(uint64_t start_ticks) {
  const long ticks_per_second = sysconf(_SC_CLK_TCK);
  return static_cast<double>(start_ticks) / static_cast<double>(ticks_per_second > 0 ? ticks_per_second : 100);
}

}  // namespace abr
