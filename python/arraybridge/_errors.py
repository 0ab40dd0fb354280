"""Python exceptions for the runtime's statuses.

Each class also derives from the builtin exception the Python array API asks for,
so `except BufferError` or `except ValueError` works as callers expect. The
status values and names are the header's, through cffi.
"""
import re

from ._lib import ffi, lib


class ArrayBridgeError(Exception):
    """A failed runtime call. `status` is the C status value, `status_name` its name;
    an error the package raises itself has its class's status (None for this class,
    DeviceError and MemoryConversionError, whose causes vary)."""

    _status = None  # the header's name of what a refusal of this class is, where one status says it

    def __init__(self, message, status=None, status_name=None):
        super().__init__(message)
        if status is None and status_name is None and self._status is not None:
            status, status_name = getattr(lib, self._status), self._status
        self.status = status
        self.status_name = status_name


class DLPackError(ArrayBridgeError, BufferError):
    """The tensor cannot be described or honoured through DLPack (dtype, strides, device, flags)."""

    _status = "ABR_ERR_UNSUPPORTED"


class CopyRequiredError(ArrayBridgeError, ValueError):
    """copy=False, but the request needs a copy."""

    _status = "ABR_ERR_COPY_REQUIRED"


class InvalidArgumentError(ArrayBridgeError, ValueError):
    """A bad argument reached the runtime."""

    _status = "ABR_ERR_INVALID_ARGUMENT"


class CastingError(ArrayBridgeError, TypeError):
    """The dtypes differ and the call's casting= rule refuses the cast (a copy's default,
    "same_kind", refuses complex to real, float to integer, signed to unsigned and
    anything but bool to bool). TypeError, as NumPy's copyto raises."""

    _status = "ABR_ERR_CASTING"


class OutOfMemoryError(ArrayBridgeError, MemoryError):
    """A host, pinned or device allocation failed."""

    _status = "ABR_ERR_OUT_OF_MEMORY"


class DeviceError(ArrayBridgeError, RuntimeError):
    """The device is absent or lost, or its backend is unavailable or failed."""


class StreamError(ArrayBridgeError, RuntimeError):
    """__dlpack__ was given a stream its tensor's device cannot have (a CPU or OpenCL
    tensor takes stream=None). RuntimeError, as NumPy raises: the array API standard
    keeps BufferError for data that cannot be exported and names no type for a wrong
    argument."""

    _status = "ABR_ERR_INVALID_ARGUMENT"


class PeerLostError(ArrayBridgeError, ConnectionError):
    """The remote peer of a transfer between processes (arraybridge.nixl, arraybridge.ray)
    closed its connection or died: the transfer did not complete, and nothing more will
    come from that peer."""

    def __init__(self, message):
        super().__init__(message, None, "peer_lost")


class MemoryConversionError(ArrayBridgeError, ValueError):
    """`convert_memory` failed. Carries `source_type`, `target_type`, `method` and `reason`."""

    def __init__(self, source_type, target_type, reason, method="convert_memory"):
        self.source_type = source_type
        self.target_type = target_type
        self.method = method
        self.reason = reason
        super().__init__(f"cannot convert {source_type} to {target_type} ({method}): {reason}")

    def __reduce__(self):
        # Made again from its four parts: pickle's default, cls(message), fails, and a
        # multiprocessing pool whose worker raised one hung unpickling it.
        return type(self), (self.source_type, self.target_type, self.reason, self.method), self.__dict__


_BY_STATUS = {
    lib.ABR_ERR_INVALID_ARGUMENT: InvalidArgumentError,
    lib.ABR_ERR_UNSUPPORTED: DLPackError,  # a valid request this build cannot do
    lib.ABR_ERR_OUT_OF_MEMORY: OutOfMemoryError,
    lib.ABR_ERR_NO_DEVICE: DeviceError,
    lib.ABR_ERR_DEVICE_LOST: DeviceError,
    lib.ABR_ERR_BACKEND: DeviceError,
    lib.ABR_ERR_BACKEND_UNAVAILABLE: DeviceError,
    lib.ABR_ERR_COPY_REQUIRED: CopyRequiredError,
    lib.ABR_ERR_READ_ONLY: DLPackError,
    lib.ABR_ERR_SHAPE_MISMATCH: InvalidArgumentError,
    lib.ABR_ERR_CASTING: CastingError,
}


def last_error_message():
    """The library's message for this thread's last failed call ("" when none)."""
    return ffi.string(lib.abr_last_error()).decode("utf-8", "replace")


_ENTRY_POINT = re.compile(r"abr_[a-z0-9_]+: ")


def last_problem():
    """The last failed call's problem in the package's words: the library's message
    without the C entry point's name, which a Python caller never called."""
    message = last_error_message()
    return message[_ENTRY_POINT.match(message).end():] if _ENTRY_POINT.match(message) else message


def status_name(status):
    """The header's name of a status ("ABR_ERR_DLPACK_SHAPE")."""
    return ffi.string(lib.abr_status_string(status)).decode()


def class_for_status(status):
    found = _BY_STATUS.get(status)
    if found is not None:
        return found
    # Every ABR_ERR_DLPACK_* status, present and future, describes a DLPack descriptor.
    return DLPackError if status_name(status).startswith("ABR_ERR_DLPACK_") else ArrayBridgeError
