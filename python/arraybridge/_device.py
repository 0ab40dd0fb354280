"""Device names ("cpu", "cuda:0", "cuda_host", "opencl:1") and the device list.
The names are the library's (abr_device_parse/abr_device_format); the list comes
from the runtime, which _core holds."""
import enum
import operator
from collections import namedtuple

from ._errors import last_problem
from ._kinds import BACKENDS, KINDS
from ._lib import _core, ffi, lib
from ._runtime import user_words


# DLPack device types this package names (the values are dlpack.h's): one per kind
# of the library's table (CPU, CUDA, CUDA_HOST, CUDA_MANAGED, OPENCL).
DLDeviceType = enum.IntEnum("DLDeviceType", [(kind.name.upper(), kind.type) for kind in KINDS], module=__name__)
DLDeviceType.__doc__ = """DLPack's device types this library serves, from its table of device kinds
(abr_device_kind_get): the values of __dlpack_device__()[0] and of a (type, id) device."""


def _library_error(context):
    return ValueError(f"arraybridge: {last_problem()}{context}")


def parse_device(device):
    """(DLDeviceType, id) for a device string, a (type, id) pair or a `Device`."""
    if isinstance(device, str):
        out = ffi.new("DLDevice*")
        if "\0" in device:  # C would read up to it: "cpu\0garbage" as "cpu"
            raise ValueError(f"arraybridge: unknown device {device!r} (a NUL inside)")
        if lib.abr_device_parse(device.encode("utf-8", "replace"), out) != lib.ABR_OK:
            raise _library_error("")
        try:
            return DLDeviceType(out.device_type), out.device_id
        except ValueError:  # dlpack_device_T:N parses any T
            raise ValueError(f"arraybridge: unknown DLPack device type {out.device_type} in {device!r}") from None
    if isinstance(device, Device):
        return device.dlpack
    if isinstance(device, (tuple, list)) and len(device) == 2:
        kind, index = device
        try:  # an int (not a bool): int() would truncate 4.9 and read "4"
            if isinstance(kind, bool):
                raise TypeError
            kind = DLDeviceType(operator.index(kind))
        except (ValueError, TypeError):
            raise ValueError(f"arraybridge: unknown DLPack device type {kind!r} in {device!r}") from None
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < 2**31:
            raise ValueError(f"arraybridge: the device id in {device!r} must be an int from 0 to 2**31 - 1 "
                             "(DLPack's int32)")
        return kind, index
    raise TypeError(f"arraybridge: a device is a string like 'cpu', 'cuda:0', 'cuda_host' or 'opencl:0', "
                    f"or a (type, id) pair; got {device!r}")


def device_string(kind, index):
    name = ffi.new("char[]", lib.ABR_NAME_MAX)
    if lib.abr_device_format((int(kind), index), name, lib.ABR_NAME_MAX) != lib.ABR_OK:
        raise _library_error(f" (device {kind}:{index})")
    return ffi.string(name).decode()


Device = namedtuple("Device", "name dlpack backend label platform memory_bytes shares_host_memory lost "
                     "double_precision", defaults=(True,))
Device.__doc__ = """One device of the runtime. `name` is what to_device takes ("opencl:0");
`label` is the hardware's own name; `dlpack` the (DLDeviceType, id) pair;
`double_precision` False for an OpenCL device without cl_khr_fp64, where a cast to
or from float64 in its memory is refused (convert on the host: to_device's dtype=)."""

BackendInfo = namedtuple("BackendInfo", "name available device_count detail")


def devices():
    """Every usable device, the CPU first."""
    found = []
    for kind, index, backend, label, platform, memory_bytes, flags in _core.devices():
        kind = DLDeviceType(kind)
        found.append(Device(
            name=device_string(kind, index), dlpack=(kind, index), backend=BACKENDS.get(backend, "?"),
            label=label, platform=platform, memory_bytes=memory_bytes,
            shares_host_memory=bool(flags & lib.ABR_DEVICE_SHARES_HOST_MEMORY),
            lost=bool(flags & lib.ABR_DEVICE_LOST_FLAG),
            double_precision=not flags & lib.ABR_DEVICE_NO_DOUBLE_PRECISION))
    return found


def backends():
    """Each backend's availability and, when it is unusable, why ("CUDA unavailable: ...")."""
    return [info._replace(detail=user_words(info.detail))
            for info in (BackendInfo(name, *_core.backend_info(code)) for code, name in BACKENDS.items())]
