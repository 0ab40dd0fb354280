// Device kernels: one strided gather/scatter walk shared by plain copies (any
// element size, moved in the widest unit alignment allows) and dtype casts
// (one program per pair, generated with the host cast's exact semantics).
#pragma once

#include <string>

#include "lib/host/strided.hpp"
#include "opencl/context.hpp"

namespace abr::opencl {

// Enqueues the copy of every element pair of `walk` (byte offsets into `src` and
// `dst`, both buffers of `context`), converting `from` to `to` when they differ.
// Throws ABR_ERR_UNSUPPORTED when the device cannot (no fp64 for a
// double-precision cast, misaligned elements for a cast).
void enqueue_strided_copy(Context& context, cl_command_queue queue, cl_mem src, cl_mem dst, const StridedCopy& walk,
                          DLDataType from, DLDataType to);

// OpenCL C sources, exposed for tests.
std::string copy_program_source();
std::string cast_program_source(DLDataType from, DLDataType to, bool fp64);

}  // namespace abr::opencl
