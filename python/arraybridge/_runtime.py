"""The process-wide runtime, created on first use, and status checking."""
import threading

from ._errors import class_for_status
from ._lib import ffi, lib

_lock = threading.Lock()
# The runtime once created; hot paths read it directly. It lives until the process
# exits: destroying it at exit would pull it from under daemon threads still
# converting, and the operating system reclaims it anyway.
current = None


def runtime():
    """The shared abr_runtime*, created on first use; one runtime serves every thread."""
    global current
    with _lock:
        if current is None:
            out = ffi.new("abr_runtime**")
            check(lib.abr_runtime_create(ffi.NULL, out), "creating the runtime")
            current = out[0]
        return current


def error(status, context):
    """The exception for a failed call, carrying the runtime's message for this thread."""
    message = ffi.string(lib.abr_last_error()).decode("utf-8", "replace")
    name = ffi.string(lib.abr_status_string(status)).decode()
    return class_for_status(status)(f"{context}: {message}" if message else f"{context}: {name}", status, name)


def check(status, context):
    if status != 0:
        raise error(status, context)
