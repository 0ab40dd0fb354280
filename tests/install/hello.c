/* Built outside the tree against an installed libarraybridge, with nothing but
 * `pkg-config --cflags --libs arraybridge`: a CPU transfer and the version. */
#include <stdio.h>
#include <string.h>

#include <arraybridge/arraybridge.h>

int main(void) {
  abr_runtime* rt = NULL;
  float data[4] = {1, 2, 3, 4};
  int64_t shape[1] = {4};
  DLManagedTensorVersioned src, *out = NULL;
  if (abr_version_number() != ABR_VERSION_NUMBER) return 1;
  if (abr_runtime_create(NULL, &rt) != ABR_OK) return 2;
  memset(&src, 0, sizeof src);
  src.version.major = DLPACK_MAJOR_VERSION;
  src.dl_tensor.data = data;
  src.dl_tensor.device.device_type = kDLCPU;
  src.dl_tensor.ndim = 1;
  src.dl_tensor.dtype.code = kDLFloat;
  src.dl_tensor.dtype.bits = 32;
  src.dl_tensor.dtype.lanes = 1;
  src.dl_tensor.shape = shape;
  if (abr_to_device(rt, &src, src.dl_tensor.device, NULL, NULL, &out) != ABR_OK) return 3;
  if (out->dl_tensor.data != data) return 4; /* same device: a zero-copy view */
  out->deleter(out);
  abr_runtime_destroy(rt);
  printf("hello-c: libarraybridge %s\n", abr_version_string());
  return 0;
}
