"""arraybridge: hand over any DLPack array, get one back on the device you asked for.

    import numpy as np, arraybridge as ab
    t = ab.to_device(np.arange(6.0).reshape(2, 3), "opencl:0")   # one planned copy (or none)
    print(t, t.report.path)
    back = np.from_dlpack(ab.to_device(t, "cpu"))

Every transfer goes through libarraybridge's planner; nothing falls back silently.
The top level is the transfer API. The rest are submodules, imported on first use:
`arraybridge.convert` (the seed API: convert_memory, detect_memory_type, MemoryType),
`arraybridge.mpi` (tensors as MPI buffers), `arraybridge.nixl` (tensors between
processes over NIXL) and `arraybridge.ray` (Ray Direct Transport).
"""
import importlib as _importlib

from . import _deprecated
from ._device import Device, BackendInfo, DLDeviceType, backends, devices
from ._errors import (ArrayBridgeError, CastingError, CopyRequiredError, DeviceError, DLPackError,
                      InvalidArgumentError, MemoryConversionError, OutOfMemoryError, PeerLostError, StreamError)
from ._ipc import IpcHandle, from_ipc, ipc_handle
from ._lib import ffi as _ffi, lib as _lib
from ._pool import device_cache_stats, pool_stats, pool_trim, set_device_cache_limit, set_staging
from ._recording import Recording, TransferRecord, recording
from ._tensor import Tensor, TransferReport
from ._transfer import Event, copy, copy_many, from_dlpack, to_device, to_device_many

__version__ = _ffi.string(_lib.abr_version_string()).decode()

__all__ = [
    "ArrayBridgeError", "BackendInfo", "CastingError", "CopyRequiredError", "DLDeviceType", "DLPackError", "Device",
    "DeviceError", "Event", "InvalidArgumentError", "IpcHandle", "MemoryConversionError", "OutOfMemoryError",
    "PeerLostError", "Recording", "StreamError", "Tensor", "TransferRecord", "TransferReport", "backends", "copy",
    "copy_many",
    "device_cache_stats", "devices", "from_dlpack", "from_ipc", "ipc_handle", "pool_stats", "pool_trim", "recording",
    "set_device_cache_limit", "set_staging", "to_device", "to_device_many",
]

_SUBMODULES = ("convert", "mpi", "nixl", "ray")

# The names the top level held before the submodules: old name -> (submodule, name there).
_MOVED = {
    "convert_memory": ("convert", "convert_memory"), "detect_memory_type": ("convert", "detect_memory_type"),
    "MemoryType": ("convert", "MemoryType"), "CPU_MEMORY_TYPES": ("convert", "CPU_MEMORY_TYPES"),
    "GPU_MEMORY_TYPES": ("convert", "GPU_MEMORY_TYPES"),
    "SUPPORTED_MEMORY_TYPES": ("convert", "SUPPORTED_MEMORY_TYPES"),
    "mpi_buffer": ("mpi", "buffer"), "mpi_cuda_aware": ("mpi", "cuda_aware"),
    "NixlPeer": ("nixl", "Peer"), "NixlTransfer": ("nixl", "Transfer"), "nixl_available": ("nixl", "nixl_available"),
}


def __getattr__(name):
    # PEP 562: a submodule is imported when first named; an old name warns and answers.
    if name in _SUBMODULES:
        return _importlib.import_module(f"{__name__}.{name}")
    moved = _MOVED.get(name)
    if moved is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, new = moved
    _deprecated.warn_moved(f"arraybridge.{name}", f"arraybridge.{module}.{new}")
    return getattr(_importlib.import_module(f"{__name__}.{module}"), new)


def __dir__():
    return sorted(set(globals()) | set(_SUBMODULES))
