#include "opencl/loader.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

#include <fmt/format.h>

#include "lib/base/settings.hpp"
#include "lib/platform/link_namespaces.hpp"
#include "lib/base/log.hpp"
#include "lib/base/text.hpp"

namespace abr::opencl {
namespace {

// llvm::cl::Option::addArgument(): every LLVM defines it, and a second LLVM's
// command-line options registering into the first one's registry is where PoCL
// dies under TensorFlow.
constexpr const char* kLlvmProbe = "_ZN4llvm2cl6Option11addArgumentEv";

// dlerror()'s text with the directory left out of the file it names: the reasons
// must fit abr_backend_info.detail.
std::string dl_error() {
  const char* why = dlerror();
  if (!why) return "unknown error";
  const std::string_view text = why;
  const std::size_t colon = text.find(": ");
  if (text.empty() || text.front() != '/' || colon == std::string_view::npos) return std::string(text);
  return fmt::format("{}{}", base_name(text.substr(0, colon)), text.substr(colon));
}

// What a user can do when glibc has no namespace to give: each new one needs static
// TLS for its own libc, from a small surplus, and there are 16 in all.
std::string ways_out(std::string_view why) {
  return why.find("static TLS") != std::string_view::npos ? "try GLIBC_TUNABLES=glibc.rtld.optional_static_tls=4096"
                                                          : "other libraries hold glibc's 16 namespaces";
}

// The loader in the process's own namespace; `why`, if any, is said in the backend's detail.
OpenedLoader open_shared(const char* path, const std::string& why, std::string* reason) {
  OpenedLoader opened;
  opened.handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!opened.handle) *reason = fmt::format("cannot load the OpenCL ICD loader {} ({})", path, dl_error());
  opened.where = why.empty() ? "in the shared namespace" : fmt::format("in the shared namespace: {}", why);
  return opened;
}

}  // namespace

bool namespace_policy(NamespacePolicy* policy, std::string* reason) {
  const char* text = settings::opencl_namespace();
  const std::string value = normalized_name(text ? text : "");
  if (value.empty() || value == "auto")
    *policy = NamespacePolicy::Auto;
  else if (value == "private")
    *policy = NamespacePolicy::Private;
  else if (value == "global")
    *policy = NamespacePolicy::Global;
  else {
    *reason = fmt::format("ARRAYBRIDGE_OPENCL_NAMESPACE={} is not one of auto, private, global", text);
    return false;
  }
  return true;
}

std::string foreign_llvm() {
  void* symbol = dlsym(RTLD_DEFAULT, kLlvmProbe);
  Dl_info info{};
  if (!symbol || !dladdr(symbol, &info) || !info.dli_fname) return "";
  const std::string_view name = base_name(info.dli_fname);
  if (name.substr(0, 7) == "libLLVM") return "";  // a shared LLVM: versioned symbols bind only their own version
  return info.dli_fname;
}

OpenedLoader open_loader(const char* path, NamespacePolicy policy, std::string* reason) {
  OpenedLoader opened;
  const std::string llvm = policy == NamespacePolicy::Private ? "" : foreign_llvm();
  if (policy == NamespacePolicy::Global) {
    if (!llvm.empty()) {
      *reason = fmt::format(
          "not opened: {}'s LLVM would crash PoCL beside it in the shared namespace, which "
          "ARRAYBRIDGE_OPENCL_NAMESPACE=global asks for; unset it to give {} a namespace of its own",
          base_name(llvm), path);
      return opened;
    }
    return open_shared(path, "as ARRAYBRIDGE_OPENCL_NAMESPACE=global asks", reason);
  }
  // A namespace of its own only where the shared one would break PoCL: its libc
  // shares the threads' pthread key slots with ours (see the header).
  if (policy == NamespacePolicy::Auto && llvm.empty()) return open_shared(path, "", reason);
  // Private, or Auto beside another LLVM. Not beside the CUDA driver: the drivers'
  // libc would overwrite its pthread keys, which crashes it (lib/platform/link_namespaces.hpp).
  if (cuda_driver_loaded()) {
    *reason = policy == NamespacePolicy::Private
        ? fmt::format(
              "not opened: in a namespace of its own, which ARRAYBRIDGE_OPENCL_NAMESPACE=private asks for, "
              "the drivers' libc would overwrite the CUDA driver's pthread keys, which crashes it; unset it "
              "to open {} in the shared namespace (where no other LLVM is loaded)",
              path)
        : fmt::format(
              "not opened: {}'s LLVM would crash PoCL in the shared namespace, and in a namespace of its "
              "own the drivers' libc would overwrite the CUDA driver's pthread keys, which crashes it",
              base_name(llvm));
    return opened;
  }
  opened.handle = dlmopen(LM_ID_NEWLM, path, RTLD_NOW | RTLD_LOCAL);
  if (opened.handle) {
    opened.private_namespace = true;
    opened.where = llvm.empty()
        ? "in a link-map namespace of its own"
        : fmt::format("in a link-map namespace of its own, away from {}'s LLVM", base_name(llvm));
    note_private_namespace(fmt::format("{} ({})", path, opened.where));
    log::warn(
        "{} is {}: its libc gives out pthread keys whose per-thread slots are also this namespace's, so the CUDA "
        "driver is not loaded in this process from now on, and another library that keeps data under a key can "
        "have it overwritten",
        path, opened.where);
    return opened;
  }
  const std::string why = dl_error();
  if (policy == NamespacePolicy::Private) {
    *reason = fmt::format(
        "no namespace of its own for {} ({}), which ARRAYBRIDGE_OPENCL_NAMESPACE=private asks "
        "for; {}",
        path, why, ways_out(why));
    return opened;
  }
  // Auto beside another LLVM: the shared namespace would crash PoCL.
  *reason = fmt::format("no namespace of its own for {} ({}), and {}'s LLVM would crash PoCL in the shared one; {}",
                        path, why, base_name(llvm), ways_out(why));
  return opened;
}

}  // namespace abr::opencl
