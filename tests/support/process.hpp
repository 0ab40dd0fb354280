// What this process holds, read from /proc: shared by the tests that count
// descriptors and the soak that samples them.
#pragma once

#include <dirent.h>

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

}  // namespace test
