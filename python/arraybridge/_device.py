"""Device names ("cpu", "cuda:0", "cuda_host", "opencl:1") and the device list."""
import enum
from collections import namedtuple

from ._lib import ffi, lib
from ._runtime import check, runtime


class DLDeviceType(enum.IntEnum):
    """DLPack device types this package names (the values are DLPack's)."""
    CPU = 1
    CUDA = 2
    CUDA_HOST = 3
    OPENCL = 4
    CUDA_MANAGED = 13


_PREFIXES = {"cpu": DLDeviceType.CPU, "cuda": DLDeviceType.CUDA, "opencl": DLDeviceType.OPENCL}
_SINGLE = {"cuda_host": DLDeviceType.CUDA_HOST, "cuda_managed": DLDeviceType.CUDA_MANAGED}


def parse_device(device):
    """(DLDeviceType, id) for a device string, a (type, id) pair or a `Device`."""
    if isinstance(device, str):
        return _parse_string(device)  # the transfer code caches what strings parse to
    if isinstance(device, Device):
        return device.dlpack
    if isinstance(device, (tuple, list)) and len(device) == 2:
        kind, index = device
        try:
            kind = DLDeviceType(int(kind))
        except (ValueError, TypeError):
            raise ValueError(f"arraybridge: unknown DLPack device type {kind!r} in {device!r}") from None
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ValueError(f"arraybridge: the device id in {device!r} must be an int >= 0")
        return kind, index
    raise TypeError(f"arraybridge: a device is a string like 'cpu', 'cuda:0', 'cuda_host' or 'opencl:0', "
                    f"or a (type, id) pair; got {device!r}")


def _parse_string(text):
    name, sep, index = text.strip().lower().partition(":")
    if name in _SINGLE and not sep:
        return _SINGLE[name], 0
    kind = _PREFIXES.get(name)
    if kind is None:
        raise ValueError(f"arraybridge: unknown device {text!r}; expected 'cpu', 'cuda:N', 'cuda_host' or 'opencl:N'")
    if not sep:
        return kind, 0
    if not index.isdigit():
        raise ValueError(f"arraybridge: bad device index in {text!r}; expected a number >= 0 after ':'")
    return kind, int(index)


def device_string(kind, index):
    kind = int(kind)
    if kind == DLDeviceType.CPU:
        return "cpu" if index == 0 else f"cpu:{index}"
    if kind == DLDeviceType.CUDA_HOST:
        return "cuda_host"
    if kind == DLDeviceType.CUDA_MANAGED:
        return "cuda_managed"
    if kind == DLDeviceType.CUDA:
        return f"cuda:{index}"
    if kind == DLDeviceType.OPENCL:
        return f"opencl:{index}"
    return f"dlpack_device_{kind}:{index}"


Device = namedtuple("Device", "name dlpack backend label platform memory_bytes shares_host_memory lost")
Device.__doc__ = """One device of the runtime. `name` is what to_device takes ("opencl:0");
`label` is the hardware's own name; `dlpack` the (DLDeviceType, id) pair."""

BackendInfo = namedtuple("BackendInfo", "name available device_count detail")

_BACKENDS = {1: "host", 2: "cuda", 3: "opencl"}


def devices():
    """Every usable device, the CPU first."""
    rt = runtime()
    count = ffi.new("int32_t*")
    check(lib.abr_device_count(rt, count), "counting devices")
    info = ffi.new("struct abr_device_info*", {"version": lib.ABR_DEVICE_INFO_VERSION})
    found = []
    for i in range(count[0]):
        check(lib.abr_device_info(rt, i, info), f"reading device {i}")
        kind, index = DLDeviceType(info.device.device_type), info.device.device_id
        found.append(Device(
            name=device_string(kind, index), dlpack=(kind, index), backend=_BACKENDS.get(info.backend, "?"),
            label=ffi.string(info.name).decode("utf-8", "replace"),
            platform=ffi.string(info.platform).decode("utf-8", "replace"), memory_bytes=info.memory_bytes,
            shares_host_memory=bool(info.flags & lib.ABR_DEVICE_SHARES_HOST_MEMORY),
            lost=bool(info.flags & lib.ABR_DEVICE_LOST_FLAG)))
    return found


def backends():
    """Each backend's availability and, when it is unusable, why ("CUDA unavailable: ...")."""
    rt = runtime()
    info = ffi.new("struct abr_backend_info*", {"version": lib.ABR_BACKEND_INFO_VERSION})
    found = []
    for code, name in _BACKENDS.items():
        check(lib.abr_backend_info(rt, code, info), f"reading the {name} backend")
        found.append(BackendInfo(name, bool(info.available), info.device_count,
                                 ffi.string(info.detail).decode("utf-8", "replace")))
    return found
