// Libraries this process opened in a link-map namespace of their own (dlmopen), and
// the CUDA driver, which must not share the process with one. glibc numbers pthread
// keys per libc but keeps their values in one array per thread, so a namespace's own
// libc hands out key numbers that the process's libraries already use, and its
// libraries overwrite their thread-specific data: PoCL in such a namespace crashes
// libcuda (SIGSEGV at exit and inside calls). The
// OpenCL loader asks cuda_driver_loaded() before it takes a namespace, and says so
// with note_private_namespace(); the CUDA driver is not loaded after that.
#pragma once

#include <string>

namespace abr {

// Whether a CUDA driver (a library whose soname is libcuda.so.1) is loaded.
bool cuda_driver_loaded();

// Records that `what` was opened in a namespace of its own (the first one is kept).
void note_private_namespace(const std::string& what);

// What note_private_namespace recorded first; empty when nothing was.
std::string private_namespace();

}  // namespace abr
