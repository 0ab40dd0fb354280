/*
 * Recording (arraybridge.recording()): while one is on, every transfer the package
 * makes, on any thread, is handed to the recorder the package set, with what it
 * moved, how and how long it took. Off, it costs one test of a pointer per call and
 * reads no clock.
 */
#include "core.h" /* Python.h first: it asks for POSIX, clock_gettime's */

#include <time.h>

PyObject* recorder;

PyObject* core_set_recorder(PyObject* module, PyObject* callable) {
  (void)module;
  if (callable != Py_None && !PyCallable_Check(callable)) {
    PyErr_SetString(PyExc_TypeError, "set_recorder(callable or None)");
    return NULL;
  }
  Py_XSETREF(recorder, callable == Py_None ? NULL : (Py_INCREF(callable), callable));
  Py_RETURN_NONE;
}

double record_clock(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

/* The KeyboardInterrupt a hook raised (type, value, traceback), until it is raised
 * again; the GIL guards it. */
static PyObject* interrupted[3];

static int raise_interrupted(void* unused) {
  (void)unused;
  if (!interrupted[0]) return 0;
  PyErr_Restore(interrupted[0], interrupted[1], interrupted[2]); /* takes the references */
  interrupted[0] = interrupted[1] = interrupted[2] = NULL;
  return -1;
}

void hook_failed(PyObject* hook) {
  if (PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
    /* Raised again, the very exception, as soon as the interpreter looks (the call
     * returns first: the transfer succeeded). Not as a signal: SIGINT ignored lost it,
     * and a handler of the user's raised its own instead (the process hunt). */
    if (interrupted[0]) {
      PyErr_Clear(); /* one is on its way already */
      return;
    }
    PyErr_Fetch(&interrupted[0], &interrupted[1], &interrupted[2]);
    if (Py_AddPendingCall(raise_interrupted, NULL) < 0) { /* the queue is full: as a signal, then */
      Py_CLEAR(interrupted[0]);
      Py_CLEAR(interrupted[1]);
      Py_CLEAR(interrupted[2]);
      PyErr_SetInterrupt();
    }
    return;
  }
  PyErr_WriteUnraisable(hook);
}

void record_transfer(const char* call, DLDevice from, DLDevice to, abr_path path, uint64_t bytes, const char* detail,
                     Py_ssize_t tensors, double start) {
  if (!recorder) return; /* turned off while the transfer ran */
  const double seconds = record_clock() - start;
  PyObject* callable = recorder; /* the call may turn it off */
  Py_INCREF(callable);
  PyObject* done = PyObject_CallFunction(callable, "s(ii)(ii)sKsnd", call, (int)from.device_type, (int)from.device_id,
                                         (int)to.device_type, (int)to.device_id, abr_path_string(path),
                                         (unsigned long long)bytes, detail, tensors, seconds);
  if (done)
    Py_DECREF(done);
  else
    hook_failed(callable); /* the transfer itself succeeded */
  Py_DECREF(callable);
}
