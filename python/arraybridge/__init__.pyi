# The public names of arraybridge: the transfer API at the top, the rest in submodules.
from __future__ import annotations
import enum
from collections.abc import Iterable
from types import TracebackType
from typing import Any, Literal, NamedTuple

from . import convert as convert, mpi as mpi, nixl as nixl, ray as ray
from ._core import (Event as Event, TensorBase, copy as copy, copy_many as copy_many,
                    from_dlpack as from_dlpack, to_device as to_device, to_device_many as to_device_many)
# Deprecated aliases (each use warns, naming the new spelling).
from .convert import (CPU_MEMORY_TYPES as CPU_MEMORY_TYPES, GPU_MEMORY_TYPES as GPU_MEMORY_TYPES,
                      SUPPORTED_MEMORY_TYPES as SUPPORTED_MEMORY_TYPES, MemoryType as MemoryType,
                      convert_memory as convert_memory, detect_memory_type as detect_memory_type)
from .mpi import buffer as mpi_buffer, cuda_aware as mpi_cuda_aware
from .nixl import Peer as NixlPeer, Transfer as NixlTransfer, nixl_available as nixl_available

__version__: str

class DLDeviceType(enum.IntEnum):
    CPU = 1
    CUDA = 2
    CUDA_HOST = 3
    OPENCL = 4
    CUDA_MANAGED = 13

class Device(NamedTuple):
    name: str
    dlpack: tuple[int, int]  # (DLDeviceType, id): an IntEnum, so an int
    backend: str
    label: str
    platform: str
    memory_bytes: int
    shares_host_memory: bool
    lost: bool

class BackendInfo(NamedTuple):
    name: str
    available: bool
    device_count: int
    detail: str

class TransferReport(NamedTuple):
    path: str
    bytes_moved: int
    packed: bool
    cast: bool
    detail: str

class IpcHandle:
    data: bytes
    def __init__(self, data: bytes | bytearray | memoryview) -> None: ...
    def __bytes__(self) -> bytes: ...

class Tensor(TensorBase):
    @property
    def size(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def report(self) -> TransferReport: ...
    def to(self, device: str | tuple[int, int] | Device, *, copy: bool | None = None, stream: Any = None,
           dtype: Any = None, host_staging: bool = True, contiguous: bool | str = False,
           non_blocking: bool = False,
           casting: Literal["no", "equiv", "safe", "same_kind", "unsafe"] | None = None) -> Tensor: ...
    def __array__(self, dtype: Any = None, copy: bool | None = None) -> Any: ...
    def ipc_handle(self) -> IpcHandle: ...
    def __dlpack_device__(self) -> tuple[DLDeviceType | int, int]: ...

class TransferRecord(NamedTuple):
    call: str
    source: str
    target: str
    path: str
    bytes: int
    seconds: float
    detail: str
    tensors: int

class _Row(NamedTuple):
    call: str
    source: str
    target: str
    path: str
    calls: int
    tensors: int
    bytes: int
    seconds: float
    reasons: tuple[str, ...]

class Recording:
    records: list[TransferRecord]
    def __init__(self, records: Iterable[TransferRecord] = ()) -> None: ...
    def __enter__(self) -> Recording: ...
    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> bool: ...
    def __len__(self) -> int: ...
    def rows(self) -> list[_Row]: ...
    def table(self) -> str: ...
    def to_json(self) -> str: ...
    @classmethod
    def from_json(cls, text: str) -> Recording: ...
    def merge(self, other: Recording) -> Recording: ...
    @classmethod
    def merged(cls, recordings: Iterable[Recording]) -> Recording: ...

def recording() -> Recording: ...
def devices() -> list[Device]: ...
def backends() -> list[BackendInfo]: ...
def ipc_handle(x: Any, *, stream: Any = None) -> IpcHandle: ...
def from_ipc(handle: IpcHandle | bytes) -> Tensor: ...
def pool_stats() -> dict[str, int]: ...
def pool_trim() -> int: ...
def device_cache_stats() -> dict[str, int]: ...
def set_device_cache_limit(limit_bytes: int) -> None: ...
def set_staging(threads: int = 0, chunk_bytes: int = 0) -> None: ...

class ArrayBridgeError(Exception):
    status: int | None
    status_name: str | None
    def __init__(self, message: str, status: int | None = None, status_name: str | None = None) -> None: ...

class DLPackError(ArrayBridgeError, BufferError): ...
class CopyRequiredError(ArrayBridgeError, ValueError): ...
class InvalidArgumentError(ArrayBridgeError, ValueError): ...
class CastingError(ArrayBridgeError, TypeError): ...
class OutOfMemoryError(ArrayBridgeError, MemoryError): ...
class DeviceError(ArrayBridgeError, RuntimeError): ...
class StreamError(ArrayBridgeError, RuntimeError): ...

class PeerLostError(ArrayBridgeError, ConnectionError):
    def __init__(self, message: str) -> None: ...

class MemoryConversionError(ArrayBridgeError, ValueError):
    source_type: str
    target_type: str
    method: str
    reason: str
    def __init__(self, source_type: str, target_type: str, reason: str, method: str = "convert_memory") -> None: ...
