"""CUDA IPC: a CUDA tensor of this process, opened zero-copy by another process on
the same machine. The handle is bytes (picklable, so multiprocessing sends it);
the exporter keeps the tensor alive until every importer has let go of its own."""
from ._lib import _core


class IpcHandle:
    """Names a CUDA tensor's memory for another process: pass it (pickled, or its
    bytes) and call `arraybridge.from_ipc` there. Made by `ipc_handle` or
    `Tensor.ipc_handle()`."""

    __slots__ = ("_data", "__weakref__")

    def __init__(self, data):
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"an IpcHandle is made from bytes, not {type(data).__name__}")
        self._data = bytes(data)

    @property
    def data(self):
        """The handle's bytes (read-only: a handle is hashed by them, and names one memory)."""
        return self._data

    def __bytes__(self):
        return self.data

    def __reduce__(self):
        return IpcHandle, (self.data,)

    def __eq__(self, other):
        return isinstance(other, IpcHandle) and other.data == self.data

    def __hash__(self):
        return hash(self.data)

    def __repr__(self):
        return f"arraybridge.IpcHandle({len(self.data)} bytes)"


def ipc_handle(x, *, stream=None):
    """An IpcHandle for the memory of `x`, any CUDA DLPack tensor (ours, PyTorch's,
    CuPy's) in memory cuMemAlloc made; stream-ordered pool memory is refused naming
    why. The handle names the memory after the work queued on `stream` (a DLPack
    stream value or a framework's stream object; None: the producer's current
    stream when its type has a DLPack C exchange API, else the legacy default
    stream): like every call here, this returns once that work is done."""
    return IpcHandle(_core.ipc_export(x, stream))


def from_ipc(handle):
    """The Tensor an IpcHandle (or its bytes) from another process names: the same
    memory, zero-copy, on this process's number of the same GPU, ready when this
    returns. Deleting it closes the mapping once this process's queued work is done."""
    if isinstance(handle, IpcHandle):
        return _core.ipc_import(handle.data)
    if not isinstance(handle, (bytes, bytearray, memoryview)):  # bytes(5) is five zero bytes, no handle
        raise TypeError(f"arraybridge: from_ipc takes an IpcHandle or its bytes; got {type(handle).__name__}")
    return _core.ipc_import(bytes(handle))
