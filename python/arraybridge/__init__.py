"""arraybridge: hand over any DLPack array, get one back on the device you asked for.

    import numpy as np, arraybridge as ab
    t = ab.to_device(np.arange(6.0).reshape(2, 3), "opencl:0")   # one planned copy (or none)
    print(t, t.report.path)
    back = np.from_dlpack(ab.to_device(t, "cpu"))

Every transfer goes through libarraybridge's planner; nothing falls back silently.
"""
from ._device import Device, BackendInfo, DLDeviceType, backends, devices
from ._errors import (ArrayBridgeError, CopyRequiredError, DeviceError, DLPackError, InvalidArgumentError,
                      MemoryConversionError, OutOfMemoryError, StreamError)
from ._ipc import IpcHandle, from_ipc, ipc_handle
from ._lib import ffi as _ffi, lib as _lib
from ._mpi import mpi_buffer, mpi_cuda_aware
from ._nixl import NixlPeer, NixlTransfer, PeerLostError, nixl_available
from ._pool import device_cache_stats, pool_stats, pool_trim, set_device_cache_limit, set_staging
from ._recording import Recording, TransferRecord, recording
from ._seed import (CPU_MEMORY_TYPES, GPU_MEMORY_TYPES, SUPPORTED_MEMORY_TYPES, MemoryType, convert_memory,
                    detect_memory_type)
from ._tensor import Tensor, TransferReport
from ._transfer import Event, copy, copy_many, from_dlpack, to_device, to_device_many

__version__ = _ffi.string(_lib.abr_version_string()).decode()

__all__ = [
    "ArrayBridgeError", "BackendInfo", "Event", "CPU_MEMORY_TYPES", "CopyRequiredError", "DLDeviceType", "DLPackError",
    "Device", "DeviceError", "GPU_MEMORY_TYPES", "InvalidArgumentError", "IpcHandle", "MemoryConversionError",
    "MemoryType", "OutOfMemoryError", "SUPPORTED_MEMORY_TYPES", "StreamError", "Tensor", "TransferReport", "backends",
    "convert_memory", "copy", "copy_many", "detect_memory_type", "devices", "from_dlpack", "from_ipc", "ipc_handle",
    "mpi_buffer", "mpi_cuda_aware", "pool_stats", "pool_trim", "set_staging", "to_device", "to_device_many",
    "device_cache_stats", "set_device_cache_limit", "NixlPeer", "NixlTransfer", "PeerLostError", "nixl_available",
    "Recording", "TransferRecord", "recording",
]
