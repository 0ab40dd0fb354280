// A process's identity beyond its pid: when the kernel started it (field 22 of
// /proc/<pid>/stat, clock ticks after boot). A pid is reused once its process has
// exited; a pid and a start time together name one process until the next boot.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace abr {

// The start time written in a /proc/<pid>/stat line, or nothing when the line is
// malformed. The command name (field 2) may hold spaces and parentheses, so the
// fields are counted after the line's last ')'.
std::optional<uint64_t> parse_start_time(std::string_view stat_line);

// Process `pid`'s start time, or nothing when this process sees no such process.
std::optional<uint64_t> process_start_time(int32_t pid);

// A start time in seconds after boot, for messages.
double seconds_after_boot(uint64_t start_ticks);

}  // namespace abr
