// Issue 64: would the driver's own batch call (cuMemcpyBatchAsync, CUDA 12.8+) cut a
// batch's submission cost? N copies of S bytes, each into or out of its own device
// allocation (as a framework's tensors lie), issued as a loop of cuMemcpy*Async or
// as one cuMemcpyBatchAsync on one stream. For each, the median over REPS of the
// host time to issue the copies and of issue + cuStreamSynchronize, in microseconds;
// every result's bytes are checked first. The driver alone: no arraybridge.
//
//   cc -O2 -I/usr/local/cuda/include dev/measure/batch_call.c -ldl -o batch_call
//   ./batch_call [REPS]
#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                                  \
  do {                                                                               \
    CUresult r_ = (call);                                                            \
    if (r_ != CUDA_SUCCESS) {                                                        \
      fprintf(stderr, "batch_call: %s failed: %d (line %d)\n", #call, r_, __LINE__); \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

static CUresult (*init)(unsigned);
static CUresult (*device_get)(CUdevice*, int);
static CUresult (*ctx_retain)(CUcontext*, CUdevice);
static CUresult (*ctx_push)(CUcontext);
static CUresult (*mem_alloc)(CUdeviceptr*, size_t);
static CUresult (*mem_free)(CUdeviceptr);
static CUresult (*host_alloc)(void**, size_t, unsigned);
static CUresult (*free_host)(void*);
static CUresult (*stream_create)(CUstream*, unsigned);
static CUresult (*stream_sync)(CUstream);
static CUresult (*htod)(CUdeviceptr, const void*, size_t, CUstream);
static CUresult (*dtoh)(void*, CUdeviceptr, size_t, CUstream);
static CUresult (*dtod)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
static CUresult (*batch)(CUdeviceptr*, CUdeviceptr*, size_t*, size_t, CUmemcpyAttributes*, size_t*, size_t, CUstream);

static void* symbol(void* lib, const char* name) {
  void* f = dlsym(lib, name);
  if (!f) fprintf(stderr, "batch_call: the driver has no %s\n", name);
  return f;
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int compare(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

enum Way { H2D_PINNED, H2D_PAGEABLE, D2H_PINNED, D2D, WAYS };
static const char* way_names[WAYS] = {"H2D pinned", "H2D pageable", "D2H pinned", "D2D"};

struct Case {
  enum Way way;
  size_t n, size;
  char *host, *check;
  CUdeviceptr *device, *other;  // each copy's own allocation; `other`: D2D's sources
  CUdeviceptr *dsts, *srcs;
  size_t* sizes;
};

static void issue(struct Case* c, int batched, CUstream stream) {
  if (batched) {
    CUmemcpyAttributes attr;
    memset(&attr, 0, sizeof attr);
    // Pageable host memory may be read out of stream order (nothing earlier on the
    // stream touches it); everything else in stream order, as the loop does.
    attr.srcAccessOrder = c->way == H2D_PAGEABLE ? CU_MEMCPY_SRC_ACCESS_ORDER_ANY : CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    size_t first = 0;
    CHECK(batch(c->dsts, c->srcs, c->sizes, c->n, &attr, &first, 1, stream));
    return;
  }
  for (size_t i = 0; i < c->n; ++i) {
    char* h = c->host + i * c->size;
    if (c->way == H2D_PINNED || c->way == H2D_PAGEABLE) CHECK(htod(c->device[i], h, c->size, stream));
    if (c->way == D2H_PINNED) CHECK(dtoh(h, c->device[i], c->size, stream));
    if (c->way == D2D) CHECK(dtod(c->device[i], c->other[i], c->size, stream));
  }
}

// Every copy's bytes arrived: each copy i carries the byte (i * 7 + round) & 0xff.
static void verify(struct Case* c, int batched, CUstream stream, int round) {
  size_t total = c->n * c->size;
  for (size_t i = 0; i < c->n; ++i) {
    unsigned char b = (unsigned char)(i * 7 + round);
    if (c->way == D2H_PINNED) {
      memset(c->check, 0, c->size);
      CHECK(htod(c->device[i], memset(c->check, b, c->size), c->size, stream));
    } else if (c->way == D2D) {
      CHECK(htod(c->other[i], memset(c->check, b, c->size), c->size, stream));
    } else {
      memset(c->host + i * c->size, b, c->size);
    }
    CHECK(stream_sync(stream));
  }
  if (c->way == D2H_PINNED) memset(c->host, 0xee, total);
  issue(c, batched, stream);
  CHECK(stream_sync(stream));
  for (size_t i = 0; i < c->n; ++i) {
    unsigned char b = (unsigned char)(i * 7 + round);
    const unsigned char* got = (const unsigned char*)c->host + i * c->size;
    if (c->way != D2H_PINNED) {
      CHECK(dtoh(c->check, c->device[i], c->size, stream));
      CHECK(stream_sync(stream));
      got = (const unsigned char*)c->check;
    }
    for (size_t k = 0; k < c->size; ++k)
      if (got[k] != b) {
        fprintf(stderr, "batch_call: %s %s copy %zu byte %zu is %u, not %u\n", way_names[c->way],
                batched ? "batch" : "loop", i, k, got[k], b);
        exit(1);
      }
  }
}

static void run(enum Way way, size_t n, size_t size, int reps, CUstream stream) {
  struct Case c = {.way = way, .n = n, .size = size};
  size_t total = n * size;
  if (way == H2D_PAGEABLE) {
    c.host = malloc(total);
  } else {
    CHECK(host_alloc((void**)&c.host, total, 0));
  }
  c.check = malloc(size);
  c.device = calloc(n, sizeof(CUdeviceptr));
  c.other = calloc(n, sizeof(CUdeviceptr));
  c.dsts = calloc(n, sizeof(CUdeviceptr));
  c.srcs = calloc(n, sizeof(CUdeviceptr));
  c.sizes = calloc(n, sizeof(size_t));
  for (size_t i = 0; i < n; ++i) {
    CHECK(mem_alloc(&c.device[i], size));
    if (way == D2D) CHECK(mem_alloc(&c.other[i], size));
    CUdeviceptr h = (CUdeviceptr)(uintptr_t)(c.host + i * size);
    c.dsts[i] = way == D2H_PINNED ? h : c.device[i];
    c.srcs[i] = way == D2H_PINNED ? c.device[i] : way == D2D ? c.other[i] : h;
    c.sizes[i] = size;
  }
  double* issue_us = malloc(sizeof(double) * reps);
  double* total_us = malloc(sizeof(double) * reps);
  double median[2][2];
  for (int batched = 0; batched < 2; ++batched) {
    verify(&c, batched, stream, batched + 1);
    for (int r = -5; r < reps; ++r) {
      double t0 = now_us();
      issue(&c, batched, stream);
      double t1 = now_us();
      CHECK(stream_sync(stream));
      double t2 = now_us();
      if (r < 0) continue;
      issue_us[r] = t1 - t0;
      total_us[r] = t2 - t0;
    }
    qsort(issue_us, reps, sizeof(double), compare);
    qsort(total_us, reps, sizeof(double), compare);
    median[batched][0] = issue_us[reps / 2];
    median[batched][1] = total_us[reps / 2];
  }
  printf("%-13s %5zu x %7zu B   loop %9.1f / %9.1f   batch %9.1f / %9.1f   batch/loop total %.2fx\n", way_names[way], n,
         size, median[0][0], median[0][1], median[1][0], median[1][1], median[0][1] / median[1][1]);
  for (size_t i = 0; i < n; ++i) {
    CHECK(mem_free(c.device[i]));
    if (way == D2D) CHECK(mem_free(c.other[i]));
  }
  if (way == H2D_PAGEABLE) {
    free(c.host);
  } else {
    CHECK(free_host(c.host));
  }
  free(c.check), free(c.device), free(c.other), free(c.dsts), free(c.srcs), free(c.sizes);
  free(issue_us), free(total_us);
}

int main(int argc, char** argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 30;
  if (reps < 1) reps = 1;
  void* lib =
      dlopen(getenv("ARRAYBRIDGE_CUDA_LIBRARY") ? getenv("ARRAYBRIDGE_CUDA_LIBRARY") : "libcuda.so.1", RTLD_NOW);
  if (!lib) {
    fprintf(stderr, "batch_call: %s\n", dlerror());
    return 1;
  }
  init = symbol(lib, "cuInit");
  device_get = symbol(lib, "cuDeviceGet");
  ctx_retain = symbol(lib, "cuDevicePrimaryCtxRetain");
  ctx_push = symbol(lib, "cuCtxPushCurrent_v2");
  mem_alloc = symbol(lib, "cuMemAlloc_v2");
  mem_free = symbol(lib, "cuMemFree_v2");
  host_alloc = symbol(lib, "cuMemHostAlloc");
  free_host = symbol(lib, "cuMemFreeHost");
  stream_create = symbol(lib, "cuStreamCreate");
  stream_sync = symbol(lib, "cuStreamSynchronize");
  htod = symbol(lib, "cuMemcpyHtoDAsync_v2");
  dtoh = symbol(lib, "cuMemcpyDtoHAsync_v2");
  dtod = symbol(lib, "cuMemcpyDtoDAsync_v2");
  batch = symbol(lib, "cuMemcpyBatchAsync_v2");
  if (!init || !device_get || !ctx_retain || !ctx_push || !mem_alloc || !mem_free || !host_alloc || !free_host ||
      !stream_create || !stream_sync || !htod || !dtoh || !dtod || !batch)
    return 1;
  CUdevice device;
  CUcontext context;
  CUstream stream;
  CHECK(init(0));
  CHECK(device_get(&device, 0));
  CHECK(ctx_retain(&context, device));
  CHECK(ctx_push(context));
  CHECK(stream_create(&stream, CU_STREAM_NON_BLOCKING));
  printf("median us of %d: issue / issue + synchronize\n", reps);
  const size_t shapes[][2] = {{1000, 4096}, {200, 65536}, {20, 1 << 20}};
  for (int way = 0; way < WAYS; ++way)
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s)
      run((enum Way)way, shapes[s][0], shapes[s][1], reps, stream);
  return 0;
}
