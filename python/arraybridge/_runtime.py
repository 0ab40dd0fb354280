"""How the runtime is created (_core holds it), and the exceptions for failed calls."""
import atexit
import os

from ._errors import class_for_status, last_error_message, status_name
from ._lib import _core, lib


def _disabled(name):
    return os.environ.get(name, "") not in ("", "0")


def runtime_flags():
    """abr_runtime_options.flags from the environment. ARRAYBRIDGE_DISABLE_OPENCL=1 or
    ARRAYBRIDGE_DISABLE_CUDA=1 leave a backend out (for instance OpenCL in a process
    where TensorFlow was imported before PoCL loaded: their two LLVMs crash PoCL's loading)."""
    return ((lib.ABR_RUNTIME_DISABLE_OPENCL if _disabled("ARRAYBRIDGE_DISABLE_OPENCL") else 0) |
            (lib.ABR_RUNTIME_DISABLE_CUDA if _disabled("ARRAYBRIDGE_DISABLE_CUDA") else 0))


def error(status, context):
    """The exception for a failed call, carrying the runtime's message for this thread."""
    message = last_error_message()
    name = status_name(status)
    return class_for_status(status)(f"{context}: {message}" if message else f"{context}: {name}", status, name)


# The runtime lives until the process exits: destroying it at exit would pull it
# from under daemon threads still converting, and the operating system reclaims it
# anyway. Its idle pinned blocks are given back at exit, while the CUDA context
# still lives (a leak checker then sees only blocks that tensors alive at exit hold).
atexit.register(_core.pool_trim, True)
