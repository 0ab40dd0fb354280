/*
 * Deferred releases. Our deleters must never take the GIL: one called inside a
 * runtime call (where the GIL is released) that waits for the GIL while the
 * interpreter finalizes is ended with pthread_exit (Python <= 3.13), and that
 * forced unwind through the runtime's C++ frames aborts the process. So a deleter
 * that runs without the GIL queues its Python work here; the queue is drained
 * with the GIL held right after every runtime call, and by a pending call for
 * deleters run on other threads.
 */
#include <pthread.h>

#include "core.h"

static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static Release* queue_head = NULL;

static int interpreter_usable(void) {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsInitialized() && !Py_IsFinalizing();
#else
  return Py_IsInitialized() && !_Py_IsFinalizing();
#endif
}

static void drain_queue(void) {
  for (;;) {
    pthread_mutex_lock(&queue_lock);
    Release* node = queue_head;
    queue_head = NULL;
    pthread_mutex_unlock(&queue_lock);
    if (!node) return;
    while (node) { /* a finish may queue more (a decref freeing a Tensor): loop */
      Release* next = node->next;
      node->finish(node);
      node = next;
    }
  }
}

static int drain_pending(void* unused) {
  (void)unused;
  drain_queue();
  return 0;
}

/* Finish now when this thread holds the GIL; queue it otherwise; leak it once the
 * interpreter is going away (the process is exiting). */
void release_later(Release* node) {
  if (!interpreter_usable()) return;
  if (PyGILState_Check()) {
    node->finish(node);
    return;
  }
  pthread_mutex_lock(&queue_lock);
  int was_empty = queue_head == NULL;
  node->next = queue_head;
  queue_head = node;
  pthread_mutex_unlock(&queue_lock);
  if (was_empty) Py_AddPendingCall(drain_pending, NULL); /* if refused, the next drain gets it */
}

void core_drain(void) {
  if (__atomic_load_n(&queue_head, __ATOMIC_ACQUIRE)) drain_queue(); /* a miss is caught by the pending call */
}
