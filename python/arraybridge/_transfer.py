"""to_device and from_dlpack: import any DLPack source and run one planned transfer."""
import logging

from . import _runtime
from ._device import device_string, parse_device
from ._dtype import parse_dtype
from ._lib import _capsule, ffi, lib
from ._tensor import Tensor

log = logging.getLogger("arraybridge")

_drain = _capsule.drain
MAX_VERSION = (1, 3)  # the DLPack version of this package's declarations
_COPY_MODES = {None: lib.ABR_COPY_IF_NEEDED, True: lib.ABR_COPY_ALWAYS, False: lib.ABR_COPY_NEVER}


def import_dlpack(x):
    """Address of a DLManagedTensorVersioned holding x's data, which the caller now owns."""
    if type(x) is Tensor:
        return _capsule.view(x._addr, x)
    if type(x).__name__ == "PyCapsule":
        return _capsule.consume(x)
    try:
        producer = x.__dlpack__
    except AttributeError:
        raise AttributeError(f"arraybridge: {type(x).__module__}.{type(x).__qualname__} is neither a DLPack "
                             "capsule nor an object with __dlpack__") from None
    try:
        capsule = producer(max_version=MAX_VERSION)
    except TypeError:  # a producer from before DLPack 1.0 rejects the keyword: ask for a legacy capsule
        capsule = producer()
    return _capsule.consume(capsule)


def _new_call(copy, dtype, strict, contiguous=False):
    """The zeroed (= default) options, report and result slot of one transfer."""
    call = ffi.new("abr_py_call*")
    if copy is not None:
        mode = _COPY_MODES.get(copy)
        if mode is None:
            raise ValueError(f"arraybridge: copy must be None, True or False, not {copy!r}")
        call.options.copy = mode
    if strict or contiguous:
        call.options.flags = ((lib.ABR_TRANSFER_NO_HOST_STAGING if strict else 0) |
                              (lib.ABR_TRANSFER_REQUIRE_CONTIGUOUS if contiguous else 0))
    if dtype is not None:
        dt = call.options.dtype
        dt.code, dt.bits, dt.lanes = parse_dtype(dtype)
    return call


def stream_handle(stream):
    """The CUDA stream handle for a DLPack stream value or a framework's stream object
    (CuPy's .ptr, PyTorch's .cuda_stream); 0 for none."""
    if stream is None or stream == -1:
        return 0
    if not isinstance(stream, int):
        native = getattr(stream, "cuda_stream", getattr(stream, "ptr", None))
        if not isinstance(native, int):
            raise TypeError(f"arraybridge: stream must be None, an int (a DLPack stream value) or a CUDA stream "
                            f"object with .ptr or .cuda_stream, not {type(stream).__name__}")
        return native or 1  # a framework's null stream is the legacy default stream: DLPack's 1
    if stream == 0 or stream < -1:
        raise ValueError(f"arraybridge: stream={stream} is not a DLPack stream value: 0 is ambiguous, so pass 1 for "
                         "the legacy default stream, 2 for the per-thread one, or a stream handle")
    return stream


def _transfer(x, dst, copy, dtype, strict, context, contiguous=False, stream=0):
    call = _new_call(copy, dtype, strict, contiguous)  # everything that can fail before x is consumed comes first
    rt = _runtime.current or _runtime.runtime()
    address = import_dlpack(x)
    if stream and (dst is None or dst[0] != lib.kDLCUDA) and lib.abr_py_device(address) >> 32 != lib.kDLCUDA:
        lib.abr_py_delete(address)
        raise ValueError(f"arraybridge: stream= orders CUDA work, and neither side of this {context} is on CUDA "
                         "(CPU and OpenCL transfers here are synchronous: pass stream=None)")
    status = lib.abr_py_transfer(rt, call, address, dst[0] if dst else 0, dst[1] if dst else 0, stream)
    _drain()  # deleters that ran inside the call (without the GIL) queued their releases
    if status != 0:  # the source is already deleted
        raise _runtime.error(status, context if dst is None else f"{context}({device_string(*dst)})")
    tensor = Tensor._adopt(call)
    if log.isEnabledFor(logging.DEBUG):
        r = tensor.report
        log.debug("%s to %s: %s, %d bytes: %s", context, tensor.device, r.path, r.bytes_moved, r.detail)
    return tensor


def to_device(x, device, *, copy=None, stream=None, dtype=None, strict=False, contiguous=False):
    """Move any DLPack array (or capsule, or Tensor) to `device`; returns a Tensor.

    device: "cpu", "cuda:N", "cuda_host", "opencl:N", a (DLDeviceType, id) pair or a
    Device from devices(). copy: None = a view when possible, True = always a new
    buffer, False = a view or ValueError. dtype: convert on the way. strict: refuse
    any path that stages through host memory. contiguous: a view must be compact
    row-major, else it is copied (for consumers such as JAX that take nothing else).
    stream: for a transfer with a CUDA side, the CUDA stream whose queued work it
    follows (a DLPack stream value: 1 legacy default, 2 per-thread, or a handle;
    or a CuPy/PyTorch stream object); the result is ready when the call returns.
    The path taken is in `.report` and logged at DEBUG on the "arraybridge" logger.
    """
    return _transfer(x, parse_device(device), copy, dtype, strict, "to_device", contiguous, stream_handle(stream))


def from_dlpack(x, *, device=None, copy=None):
    """Import any DLPack producer or capsule as a Tensor: zero-copy on its own device,
    or moved to `device`; copy as in to_device."""
    return _transfer(x, None if device is None else parse_device(device), copy, None, False, "from_dlpack")


def transfer_tensor(tensor, dst, copy, context):
    """A Tensor on `dst` from another one, which stays usable."""
    return _transfer(tensor, dst, copy, None, False, context)
