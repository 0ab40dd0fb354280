// Opens the OpenCL ICD loader, and with it the drivers it loads, where no library
// already in the process can break them.
//
// Drivers built on LLVM (PoCL) break when another LLVM is in the process's global
// scope (TensorFlow's, exported unversioned): the driver's references to LLVM bind
// to the other copy. Loaded before, it crashes PoCL's start; loaded after, PoCL's
// kernel builds fail ("unknown target CPU"). In a link-map namespace of its own
// (dlmopen) the loader and its drivers see only their own libraries. But that
// namespace has a libc of its own, and glibc's pthread keys are numbered per libc
// while their per-thread slots are one array in the thread: the drivers' keys
// overwrite the values the process's libraries keep under keys of the same numbers.
// That crashes the CUDA driver, at exit and inside calls, even with PoCL alone in
// the namespace. So the shared namespace is the default,
// a namespace of its own is taken only where the shared one is known to break PoCL
// (another LLVM already loaded) or where asked for, and never beside the CUDA driver. Its other costs: other
// libraries' OpenCL objects come from another copy of the driver (matched by
// device_key), sanitizers do not see into its libc, and glibc has few namespaces.
#pragma once

#include <string>

namespace abr::opencl {

// Where the loader is opened, from $ARRAYBRIDGE_OPENCL_NAMESPACE: auto (the default)
// the shared namespace, unless another LLVM is loaded there, then a namespace of its
// own (or nothing, with the reason, when glibc has none to give); private a
// namespace of its own or nothing; global the shared one, unless another LLVM is
// loaded there. No namespace of its own is taken while the CUDA driver is loaded,
// nor the driver loaded after one was (lib/platform/link_namespaces.hpp).
enum class NamespacePolicy { Auto, Private, Global };

struct OpenedLoader {
  void* handle = nullptr;          // null when it could not be opened
  bool private_namespace = false;  // opened with dlmopen(LM_ID_NEWLM)
  std::string where;               // which namespace, and why, for the backend's detail
};

// Reads $ARRAYBRIDGE_OPENCL_NAMESPACE; false with `reason` naming the variable for a
// value it does not know.
bool namespace_policy(NamespacePolicy* policy, std::string* reason);

// The file of the library in the global scope whose LLVM would capture a driver's
// references to LLVM (one that defines LLVM's C++ symbols and is not a libLLVM-N.so,
// whose symbols are versioned); empty when there is none.
std::string foreign_llvm();

// Opens `path` as `policy` says. On failure the handle is null and `reason` says why
// and what the user can do; nothing is loaded in the shared namespace while another
// LLVM is there.
OpenedLoader open_loader(const char* path, NamespacePolicy policy, std::string* reason);

}  // namespace abr::opencl
