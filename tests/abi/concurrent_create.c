/* Runtimes created from many threads at once, as the first thing the process does:
 * every thread must see the same devices. (A regression test: two threads once
 * raced through the OpenCL driver's first-call initialisation and crashed PoCL.) */
#include <pthread.h>
#include <stdio.h>

#include <arraybridge/arraybridge.h>

#define THREADS 8

static int32_t counts[THREADS];

static void* create(void* arg) {
  int i = (int)(size_t)arg;
  abr_runtime* rt = NULL;
  counts[i] = -1;
  if (abr_runtime_create(NULL, &rt) == ABR_OK && abr_device_count(rt, &counts[i]) != ABR_OK) counts[i] = -1;
  abr_runtime_destroy(rt);
  return NULL;
}

int main(void) {
  pthread_t threads[THREADS];
  int i, failures = 0;
  for (i = 0; i < THREADS; ++i) pthread_create(&threads[i], NULL, create, (void*)(size_t)i);
  for (i = 0; i < THREADS; ++i) pthread_join(threads[i], NULL);
  for (i = 0; i < THREADS; ++i) failures += counts[i] < 1 || counts[i] != counts[0];
  printf("concurrent-create: %d passed, %d failed (%d threads, %d devices each)\n", THREADS - failures, failures,
         THREADS, counts[0]);
  return failures != 0;
}
