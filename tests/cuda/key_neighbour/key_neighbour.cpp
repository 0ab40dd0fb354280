// Stands in for a library that keeps per-thread data under pthread keys, as the
// OpenCL drivers did that overwrote the CUDA driver's on an H100 machine (PoCL 5
// with LLVM 16, NVIDIA's OpenCL). Opened in the shared namespace its keys are new
// numbers; opened in a namespace of its own (with its own libc) they start again
// from 0, and their values land in the slots the process's libraries use.
#include <pthread.h>

namespace {
constexpr int kKeys = 32;  // every slot a thread holds in place (glibc's first block)
pthread_key_t keys[kKeys];
int values[kKeys];
void* before[kKeys];  // what the slots held, put back by key_neighbour_clear
bool made = false;
}  // namespace

// Sets every key of this library on the calling thread; the number of its first key,
// or -1 when the keys cannot be made.
extern "C" int key_neighbour_fill() {
  if (!made) {
    for (pthread_key_t& key : keys)
      if (pthread_key_create(&key, nullptr) != 0) return -1;
    made = true;
  }
  for (int k = 0; k < kKeys; ++k) {
    before[k] = pthread_getspecific(keys[k]);
    pthread_setspecific(keys[k], &values[k]);
  }
  return static_cast<int>(keys[0]);
}

// Puts back what the calling thread's slots held before key_neighbour_fill (in a
// namespace of its own, other libraries' values).
extern "C" void key_neighbour_clear() {
  if (!made) return;
  for (int k = 0; k < kKeys; ++k) pthread_setspecific(keys[k], before[k]);
}
