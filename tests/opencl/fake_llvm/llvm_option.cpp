// A stand-in for another LLVM in the process (TensorFlow's): a library that defines,
// unversioned, the LLVM symbol opencl/loader.cpp probes for. Loaded RTLD_GLOBAL by
// the namespace tests, it must send the OpenCL loader into a namespace of its own.
namespace llvm {
namespace cl {
struct Option {
  void addArgument();
};
__attribute__((visibility("default"))) void Option::addArgument() {}
}  // namespace cl
}  // namespace llvm
