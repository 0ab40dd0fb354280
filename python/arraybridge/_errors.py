"""Python exceptions for the runtime's statuses.

Each class also derives from the builtin exception the Python array API asks for,
so `except BufferError` or `except ValueError` works as callers expect.
"""


class ArrayBridgeError(Exception):
    """A failed runtime call. `status` is the C status value, `status_name` its name."""

    def __init__(self, message, status=None, status_name=None):
        super().__init__(message)
        self.status = status
        self.status_name = status_name


class DLPackError(ArrayBridgeError, BufferError):
    """The tensor cannot be described or honoured through DLPack (dtype, strides, device, flags)."""


class CopyRequiredError(ArrayBridgeError, ValueError):
    """copy=False, but the request needs a copy."""


class InvalidArgumentError(ArrayBridgeError, ValueError):
    """A bad argument reached the runtime."""


class OutOfMemoryError(ArrayBridgeError, MemoryError):
    """A host, pinned or device allocation failed."""


class DeviceError(ArrayBridgeError, RuntimeError):
    """The device is absent or lost, or its backend is unavailable or failed."""


class MemoryConversionError(Exception):
    """`convert_memory` failed. Carries `source_type`, `target_type`, `method` and `reason`."""

    def __init__(self, source_type, target_type, reason, method="convert_memory"):
        self.source_type = source_type
        self.target_type = target_type
        self.method = method
        self.reason = reason
        super().__init__(f"cannot convert {source_type} to {target_type} ({method}): {reason}")


# Status ranges from arraybridge.h: -90..-119 describe a DLPack descriptor.
_BY_STATUS = {
    -1: InvalidArgumentError,
    -2: DLPackError,  # ABR_ERR_UNSUPPORTED: a valid request this build cannot do
    -3: ArrayBridgeError,
    -40: OutOfMemoryError,
    -60: DeviceError,
    -61: DeviceError,
    -62: DeviceError,
    -63: DeviceError,
    -80: CopyRequiredError,
    -81: DLPackError,
    -82: InvalidArgumentError,
}


def class_for_status(status):
    if -119 <= status <= -90:
        return DLPackError
    return _BY_STATUS.get(status, ArrayBridgeError)
