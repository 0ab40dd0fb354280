// Processes, read from /proc and started again: shared by the tests that count
// descriptors or need a second process, and the soak that samples descriptors.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

extern char** environ;

namespace test {

// Descriptors this process has open now.
inline int open_descriptors() {
  int n = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (const dirent* entry = readdir(dir))
      if (entry->d_name[0] != '.') ++n;
    closedir(dir);
  }
  return n - 1;  // the directory's own
}

// Runs this program again with `args` (and this environment) and waits for it; returns
// what it wrote on stdout. *status is its exit code, or -N when signal N ended it, or
// -1000 when it could not start.
inline std::string run_this_program(const std::vector<std::string>& args, int* status) {
  *status = -1000;
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return "";  // the child gets the write end as its stdout only
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  std::string self = "/proc/self/exe";
  std::vector<std::string> words(args);
  std::vector<char*> argv{&self[0]};
  for (std::string& word : words) argv.push_back(&word[0]);
  argv.push_back(nullptr);
  pid_t child = 0;
  const int spawned = posix_spawn(&child, self.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t got; spawned == 0 && (got = read(out[0], buffer, sizeof buffer)) != 0;) {
    if (got > 0)
      text.append(buffer, static_cast<std::size_t>(got));
    else if (errno != EINTR)
      break;
  }
  close(out[0]);
  int wait_status = 0;
  if (spawned == 0 && waitpid(child, &wait_status, 0) == child)
    *status = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -WTERMSIG(wait_status);
  return text;
}

}  // namespace test
