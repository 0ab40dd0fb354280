// Every environment variable libarraybridge reads, in one place, as KvikIO keeps its
// defaults: what each sets, its default, and when it is read. Nothing else in the
// library calls getenv. (The Python package reads ARRAYBRIDGE_DISABLE_CUDA and
// ARRAYBRIDGE_DISABLE_OPENCL itself and passes them as abr_runtime_options.flags.)
#pragma once

namespace abr::settings {

// ARRAYBRIDGE_STAGING_THREADS: host threads of a staged or reshaped copy, 1 to 256
// (default: one per core, at most 16). Read on each large copy, so a test may change it.
// 0 (the default) when unset, empty or 0; another value outside that range is a
// warning on the log, once per value, and the default.
unsigned long staging_threads();

// ARRAYBRIDGE_STAGING_CHUNK_MIB: the chunk of a staged transfer, in MiB, 1 to 1024
// (default: the planner's, 8 to 64 MiB). Read on each large copy; as above otherwise.
unsigned long staging_chunk_mib();

// ARRAYBRIDGE_KEEP_HOST_BUFFERS=0: small host buffers are freed at once instead of
// kept for reuse (for memcheck, which then sees every free). Read once.
bool keep_host_buffers();

// ARRAYBRIDGE_LOG_LEVEL: trace, debug, info, warn (the default), error or off; nullptr
// when unset. Read once, when logging starts.
const char* log_level();

// ARRAYBRIDGE_CUDA_LIBRARY: the CUDA driver to open instead of libcuda.so.1 (the
// tests' fake driver). Read when the CUDA backend opens.
const char* cuda_library();

// ARRAYBRIDGE_OPENCL_LIBRARY: the OpenCL ICD loader to open instead of libOpenCL.so.1.
// Read when the OpenCL backend opens.
const char* opencl_library();

// ARRAYBRIDGE_OPENCL_NAMESPACE: auto (the default), private or global: where the
// OpenCL loader is opened (opencl/loader.hpp). Read when the OpenCL backend opens.
const char* opencl_namespace();

}  // namespace abr::settings
