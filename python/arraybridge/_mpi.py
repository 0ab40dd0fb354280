"""Tensors as MPI buffers (mpi4py); public as arraybridge.mpi. mpi4py takes any
DLPack object as a buffer, arraybridge.Tensor included, so a compact tensor in host
memory (`cpu`, `cuda_host`) goes to Send/Recv/Bcast/Allreduce as it is, with no copy.
What MPI cannot take as it is, `mpi_buffer` (arraybridge.mpi.buffer) turns into what it
can, with one planned copy the report names: a strided tensor is packed, and a CUDA
tensor goes through pinned host memory unless the MPI library is CUDA-aware (given
such a pointer, an MPI library that is not crashes: never pass one straight to mpi4py
then), and an OpenCL tensor, whose data is a cl_mem no MPI can read, through host
memory (passed straight, mpi4py's request for it is refused).
mpi4py itself is not imported here: the caller's MPI is the caller's."""
import contextlib
import ctypes
import functools
import logging
import os

from . import _deprecated
from ._errors import CopyRequiredError
from ._lib import _core

log = logging.getLogger("arraybridge")

_HOST_MEMORY = ("cpu", "cuda_host")
_MODES = ("r", "w", "rw")


def mpi_cuda_aware():
    """Whether the MPI library under mpi4py takes CUDA device pointers:
    $ARRAYBRIDGE_MPI_CUDA_AWARE (1 or 0) when set, else MPI's own answer (through
    mpi4py where it offers one, else asked of the MPI library mpi4py loaded: Open MPI's
    MPIX_Query_cuda_support, MPICH's MPIX_GPU_query_support), else False."""
    told = os.environ.get("ARRAYBRIDGE_MPI_CUDA_AWARE")
    if told is not None:
        if told not in ("0", "1"):
            raise ValueError(f"ARRAYBRIDGE_MPI_CUDA_AWARE must be 0 or 1, not {told!r}")
        return told == "1"
    try:
        from mpi4py import MPI
    except ImportError:
        return False
    query = getattr(MPI, "Query_cuda_support", None)  # no mpi4py up to 4.1 has it
    return bool(query()) if query else bool(_mpi_library_answer())


@functools.lru_cache(maxsize=None)
def _mpi_library_answer():
    """MPI's own answer whether it takes CUDA device pointers (True, False), asked of
    the libmpi this process loaded, or None where it names no such query. Asked once:
    a library's build and start-up decide it."""
    try:
        with open("/proc/self/maps") as maps:  # the libmpi mpi4py loaded, not another find_library might name
            paths = {line.split()[-1] for line in maps if "/libmpi.so" in line}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            library = ctypes.CDLL(path)  # loaded already: the same library
        except OSError:  # a file replaced since it was loaded ("(deleted)")
            continue
        if hasattr(library, "MPIX_Query_cuda_support"):  # Open MPI (mpi-ext.h)
            library.MPIX_Query_cuda_support.restype = ctypes.c_int
            return library.MPIX_Query_cuda_support() == 1
        if hasattr(library, "MPIX_GPU_query_support"):  # MPICH 4 (mpi.h): MPIX_GPU_SUPPORT_CUDA is 0
            supported = ctypes.c_int(0)
            library.MPIX_GPU_query_support.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int)]
            return library.MPIX_GPU_query_support(0, ctypes.byref(supported)) == 0 and supported.value == 1
    return None


@contextlib.contextmanager
def mpi_buffer(x, mode="rw", *, cuda_aware=None, host_staging=True, strict=None):
    """A buffer for mpi4py holding `x`'s elements (any DLPack array), for the
    duration of the `with` block:

        with arraybridge.mpi.buffer(t, "w") as buffer:
            comm.Recv(buffer, source=0)      # t holds what arrived

    a zero-copy view of `x` when MPI can use its memory as it is: compact,
    and in host memory or, with a CUDA-aware MPI, on a CUDA device. Otherwise a
    compact copy: in pinned host memory (`cuda_host`) for a CUDA tensor, in `cpu`
    memory for any other. mode "r" (MPI reads it: Send, Bcast's root) copies in
    only; "w" and "rw" (MPI writes: Recv, Bcast, Allreduce's result) also copy the
    buffer back into `x` when the block ends without an error. Keep the block open
    until a non-blocking request (Isend, Irecv) has completed. With "w" and "rw",
    `x` is refused as a copy's destination would be (read-only; a torch tensor that
    requires grad, has a conj or neg bit, or was made under inference_mode), before
    MPI writes, and a torch tensor's version is bumped once the block ends, as a
    copy's write bumps it, so autograd sees MPI's write. The buffer's
    `.report` says which: "zero_copy", or the copy made. host_staging=False refuses a
    copy through host memory (CopyRequiredError) instead (strict=True, its old
    spelling, is deprecated). cuda_aware: None asks `cuda_aware()`."""
    host_staging = _deprecated.host_staging("arraybridge.mpi.buffer", host_staging, strict,
                                            stacklevel=5)  # under contextlib's __enter__
    if mode not in _MODES:
        raise ValueError(f"arraybridge.mpi.buffer: mode must be one of {_MODES}, not {mode!r}")
    capsule = type(x).__name__ == "PyCapsule"  # used up by its import: vetted as the Tensor it became
    tensor = _core.from_dlpack(x)  # of a Tensor too, a view: its report says this call's path, not x's maker's
    if mode != "r":  # refused as a copy into x would be (read-only, autograd's, torch's lazy bits), before MPI writes
        _core.vet_destination(tensor if capsule else x, "arraybridge.mpi.buffer")
    dst = tensor if capsule or tensor.report.path == "zero_copy" else x  # where MPI's writes land
    kind = tensor.device.split(":")[0]
    reachable = kind in _HOST_MEMORY or (  # memory the MPI library reads and writes itself
        kind == "cuda" and (mpi_cuda_aware() if cuda_aware is None else cuda_aware))
    if not reachable and not host_staging:
        raise CopyRequiredError(f"arraybridge: mpi.buffer of a {tensor.device} tensor: the MPI library is not "
                                f"CUDA-aware (or {kind} memory is beyond MPI), so the data would go through host "
                                "memory, which host_staging=False refuses")
    target = tensor.device if reachable else "cuda_host" if kind == "cuda" else "cpu"
    # Where MPI reaches x's memory, the planner decides: x's memory as it is where it is
    # compact, else one compact copy; elsewhere (a view of managed memory on the host
    # included) always a copy, in host memory.
    buffer = _core.to_device(tensor, target, contiguous=True, copy=None if reachable else True)
    if buffer.report.path == "zero_copy":
        buffer = tensor  # the same memory on the same device, whose report says how x became it
    if buffer is tensor and (mode == "r" or dst is tensor):
        try:
            yield buffer
        finally:  # MPI wrote x's memory itself: autograd hears of it as of a copy (a failed block may have written)
            if mode != "r":
                _core.wrote(tensor)
        return
    log.debug("mpi_buffer %s %s: %s (%s)", tensor.device, "packed" if reachable else "staged",
              buffer.report.path, buffer.report.detail)
    yield buffer
    if mode != "r":
        _core.copy(buffer, dst)
