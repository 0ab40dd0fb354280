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


def _transfer(x, dst, copy, dtype, strict, context, contiguous=False):
    call = _new_call(copy, dtype, strict, contiguous)  # everything that can fail before x is consumed comes first
    rt = _runtime.current or _runtime.runtime()
    address = import_dlpack(x)
    status = lib.abr_py_transfer(rt, call, address, dst[0] if dst else 0, dst[1] if dst else 0)
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
    The path taken is in `.report` and logged at DEBUG on the "arraybridge" logger.
    """
    if stream is not None:
        raise ValueError(f"arraybridge: stream={stream!r}: CPU and OpenCL transfers here run synchronously "
                         "and take stream=None (streams come with the CUDA backend)")
    return _transfer(x, parse_device(device), copy, dtype, strict, "to_device", contiguous)


def from_dlpack(x, *, device=None, copy=None):
    """Import any DLPack producer or capsule as a Tensor: zero-copy on its own device,
    or moved to `device`; copy as in to_device."""
    return _transfer(x, None if device is None else parse_device(device), copy, None, False, "from_dlpack")


def transfer_tensor(tensor, dst, copy, context):
    """A Tensor on `dst` from another one, which stays usable."""
    return _transfer(tensor, dst, copy, None, False, context)
