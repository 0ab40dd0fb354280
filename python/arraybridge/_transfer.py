"""to_device and from_dlpack. The transfer itself is C (_core); this module holds
the Python hooks it calls for what is rare or slow to parse: devices not seen
before, dtypes, stream objects, errors and the DEBUG log line."""
import logging
import re
import sys

from . import _deprecated, _runtime, _structure
from ._device import device_string, parse_device
from ._dtype import parse_dtype
from ._lib import _core, lib
from ._producers import producer_traits, refusal, vet_producer
from ._stream import stream_handle
from ._tensor import Tensor

log = logging.getLogger("arraybridge")

to_device = _core.to_device
to_device_many = _core.to_device_many
copy_many = _core.copy_many
from_dlpack = _core.from_dlpack
copy = _core.copy
Event = _core.Event


def producer_strides(producer, itemsize):
    """The element strides a producer known to export wrong ones meant, or None.

    CuPy 13.4 to 14.2 divide negative byte strides by the item size as unsigned
    numbers, so x[::-1] exports about 2**64 / itemsize (cupy/cupy#10172, fixed by
    cupy/cupy#10228 after 14.2). Its __cuda_array_interface__ still has the signed
    byte strides; the C side uses them only where both agree modulo 2**64."""
    if not type(producer).__module__.startswith("cupy"):
        return None
    version = re.match(r"(\d+)\.(\d+)", getattr(sys.modules.get("cupy"), "__version__", ""))
    if not version or not (13, 4) <= (int(version[1]), int(version[2])) <= (14, 2):
        return None
    interface = getattr(producer, "__cuda_array_interface__", None) or {}
    strides = interface.get("strides") or getattr(producer, "strides", None)
    if not strides or any(s % itemsize for s in strides):
        return None
    return [s // itemsize for s in strides]


# Why a destination is read-only, said where a copy into one is refused (for a batch,
# and for writes MPI or NIXL make, by import.c's refuse_read_only, given it by setup).
_READ_ONLY_WHY = ("; JAX and TensorFlow arrays are immutable, a legacy DLPack capsule cannot say it may be written, "
                  "a read-only NumPy array says so, and a Tensor viewing a torch tensor that requires grad is "
                  "autograd's (view its .detach() to write): copy into a writable array")


def _error(status, context, dst):
    error = _runtime.error(status, context if dst is None else f"{context}({_named(dst)})")
    if status == lib.ABR_ERR_READ_ONLY and context == "copy":
        return type(error)(str(error) + _READ_ONLY_WHY, error.status, error.status_name)
    return error


def _named(device):
    """A destination's name for a message, also where it names no device ("cpu:1"): its
    refusal is said by the status; formatting it must not raise in its place."""
    try:
        return device_string(*device)
    except ValueError:
        return f"{int(device[0])}:{device[1]}"


def _log_transfer(tensor, context):
    if log.isEnabledFor(logging.DEBUG):
        r = tensor.report
        log.debug("%s to %s: %s, %d bytes: %s", context, tensor.device, r.path, r.bytes_moved, r.detail)


def _to_device_structure(x, device, copy=None, stream=None, dtype=None, host_staging=True, contiguous=False,
                         non_blocking=False, strict=None, casting=None):
    """to_device of a structure (a mapping, list or tuple of arrays, nested: see
    _structure): one batch for all of them (_core.to_device_many, on `stream` where
    given), the same structure back. A failure names the array's place in the structure."""
    if strict is not None:
        host_staging = _deprecated.host_staging("to_device", host_staging, strict)
    if _core.is_flat(x):  # a list of arrays, no structure in it
        return _core.to_device_many(x, device, copy=copy, stream=stream, dtype=dtype, host_staging=host_staging,
                                    contiguous=contiguous, non_blocking=non_blocking, casting=casting)
    leaves = _structure.leaves(x, [])
    try:
        moved = _core.to_device_many(leaves, device, copy=copy, stream=stream, dtype=dtype, host_staging=host_staging,
                                     contiguous=contiguous, non_blocking=non_blocking, casting=casting)
    except Exception as error:  # noqa: BLE001 - restated naming the place, in its own class
        _structure.raise_placed(error, {"x": x})
        raise
    return _structure.rebuild(x, iter(moved))


def _copy_structure(src, dst, host_staging=True, non_blocking=False, strict=None, casting=None):
    """copy of a structure into a structure of the same shape (a mapping's items
    paired by key): every pair in one batch (_core.copy_many); with non_blocking, its
    Event (or None when done)."""
    if strict is not None:
        host_staging = _deprecated.host_staging("copy", host_staging, strict)
    flat = type(src) is list and type(dst) is list and len(src) == len(dst) and _core.is_flat(src) and _core.is_flat(dst)
    if not flat:  # two lists of arrays, no structure in them, need no walk in Python (a third of a small pair's cost)
        try:
            if not _structure.same_shape(src, dst):  # a mapping's pairs by key, whatever each side's order
                src = _structure.in_order_of(src, dst)
        except RecursionError:
            raise _structure.endless() from None
    try:
        return _core.copy_many(src if flat else _structure.leaves(src, []), dst if flat else _structure.leaves(dst, []),
                               host_staging=host_staging, non_blocking=non_blocking, casting=casting)
    except Exception as error:  # noqa: BLE001 - restated naming the place, in its own class
        _structure.raise_placed(error, {"src": src, "dst": dst, "srcs": src, "dsts": dst},
                                {"srcs": "src", "dsts": "dst"})
        raise


# What _core.setup registers, kept for the tests that name its hooks or register them again.
_SETUP = dict(tensor_type=Tensor, parse_device=parse_device, parse_dtype=parse_dtype, stream_handle=stream_handle,
              producer_strides=producer_strides, error=_error, log_transfer=_log_transfer, logger=log,
              producer_traits=producer_traits, vet_producer=vet_producer, refusal=refusal,
              to_device_structure=_to_device_structure, copy_structure=_copy_structure, read_only_why=_READ_ONLY_WHY,
              runtime_flags=_runtime.runtime_flags())
_core.setup(**_SETUP)
