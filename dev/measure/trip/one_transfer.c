/* One host -> opencl:0 abr_to_device of 4 KiB after a warm-up one: the trip dev/measure/trip/count.sh steps through. */
#include <stdio.h>
#include <arraybridge/arraybridge.h>

static void deleter(DLManagedTensorVersioned* self) { (void)self; }

int main(void) {
  abr_runtime* rt = NULL;
  if (abr_runtime_create(NULL, &rt) != ABR_OK) return 1;
  static float data[1024];
  int64_t shape[1] = {1024};
  DLDevice dst;
  if (abr_device_parse("opencl:0", &dst) != ABR_OK) return 2;
  for (int i = 0; i < 2; ++i) {
    DLManagedTensorVersioned src = {
        .version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION},
        .deleter = deleter,
        .dl_tensor = {.data = data, .device = {kDLCPU, 0}, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = shape},
    };
    DLManagedTensorVersioned* out = NULL;
    if (abr_to_device(rt, &src, dst, NULL, NULL, &out) != ABR_OK) {
      printf("%s\n", abr_last_error());
      return 3;
    }
    out->deleter(out);
  }
  abr_runtime_destroy(rt);
  puts("ok");
  return 0;
}
