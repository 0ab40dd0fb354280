"""The process-wide runtime, created on first use, and status checking."""
import atexit
import os
import threading

from ._errors import class_for_status
from ._lib import ffi, lib

_lock = threading.Lock()
# The runtime once created; hot paths read it directly. It lives until the process
# exits: destroying it at exit would pull it from under daemon threads still
# converting, and the operating system reclaims it anyway. Its idle pinned blocks
# are given back at exit, while the CUDA context still lives (a leak checker then
# sees only blocks that tensors alive at exit still hold).
current = None


def _give_back_idle_pinned_blocks():
    if current is not None:
        lib.abr_pool_trim(current, ffi.NULL)


def _disabled(name):
    return os.environ.get(name, "") not in ("", "0")


def runtime():
    """The shared abr_runtime*, created on first use; one runtime serves every thread.

    ARRAYBRIDGE_DISABLE_OPENCL=1 or ARRAYBRIDGE_DISABLE_CUDA=1 leave a backend out
    (for instance OpenCL in a process where TensorFlow was imported before PoCL
    loaded: their two LLVMs crash PoCL's loading)."""
    global current
    with _lock:
        if current is None:
            options = ffi.new("abr_runtime_options*", {"version": lib.ABR_RUNTIME_OPTIONS_VERSION})
            options.flags = ((lib.ABR_RUNTIME_DISABLE_OPENCL if _disabled("ARRAYBRIDGE_DISABLE_OPENCL") else 0) |
                             (lib.ABR_RUNTIME_DISABLE_CUDA if _disabled("ARRAYBRIDGE_DISABLE_CUDA") else 0))
            out = ffi.new("abr_runtime**")
            check(lib.abr_runtime_create(options, out), "creating the runtime")
            current = out[0]
            atexit.register(_give_back_idle_pinned_blocks)
        return current


def error(status, context):
    """The exception for a failed call, carrying the runtime's message for this thread."""
    message = ffi.string(lib.abr_last_error()).decode("utf-8", "replace")
    name = ffi.string(lib.abr_status_string(status)).decode()
    return class_for_status(status)(f"{context}: {message}" if message else f"{context}: {name}", status, name)


def check(status, context):
    if status != 0:
        raise error(status, context)
