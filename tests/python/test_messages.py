"""One error rule, from Python: a failed call says which call failed and what was
wrong, in the words of the call the user made: never the C entry point's name,
never a C option's name where the Python call has a keyword for it."""
import numpy as np
import pytest

import arraybridge as ab
from arraybridge.convert import convert_memory

SIX = np.arange(6, dtype=np.float32)
READ_ONLY = np.broadcast_to(np.float32(0), (6,))

# (what, call, exception, whole message)
ROWS = [
    ("an unknown device", lambda: ab.to_device(SIX, "gpu:0"), ValueError,
     "to_device: unknown device 'gpu:0'; expected 'cpu', 'cuda:N', 'cuda_host', 'cuda_managed', 'opencl:N' or "
     "'dlpack_device_T:N'"),
    ("an unknown device type", lambda: ab.to_device(SIX, ("x", 0)), ValueError,
     "to_device: unknown DLPack device type 'x' in ('x', 0)"),
    # A helper's hunt: int() read 4.9 and "4" as opencl, C read up to a NUL, and an unknown T
    # gave Python's enum error without the call.
    ("a float device type", lambda: ab.to_device(SIX, (4.9, 0)), ValueError,
     "to_device: unknown DLPack device type 4.9 in (4.9, 0)"),
    ("a numeric string device type", lambda: ab.to_device(SIX, ("4", 0)), ValueError,
     "to_device: unknown DLPack device type '4' in ('4', 0)"),
    ("a device string with a NUL", lambda: ab.to_device(SIX, "cpu\0garbage"), ValueError,
     "to_device: unknown device 'cpu\\x00garbage' (a NUL inside)"),
    ("an unknown dlpack_device_T", lambda: ab.to_device(SIX, "dlpack_device_99:0"), ValueError,
     "to_device: unknown DLPack device type 99 in 'dlpack_device_99:0'"),
    ("a stream value out of range", lambda: ab.to_device(SIX, "opencl:0", stream=-5), ValueError,
     "to_device: stream=-5 is not a DLPack stream value: -1 (none), 1 (the legacy default stream), 2 (the "
     "per-thread one) or a stream handle from 3 to 2**64 - 1"),
    # Read by truth, host_staging=None allowed staging and non_blocking="x" queued.
    ("host_staging=None", lambda: ab.to_device(SIX, "cpu", host_staging=None), TypeError,
     "to_device: host_staging must be True or False, not None"),
    ("non_blocking that is no bool", lambda: ab.copy(SIX, np.zeros(6, np.float32), non_blocking="x"), TypeError,
     "copy: non_blocking must be True or False, not 'x'"),
    ("contiguous=1", lambda: ab.to_device(SIX, "cpu", contiguous=1), TypeError,
     "to_device: contiguous must be True, False or \"nonnegative\", not 1"),
    ("set_staging past 64 bits", lambda: ab.set_staging(0, 2**70), ValueError,
     "set_staging: chunk_bytes must be from 0 to 2**64 - 1, not 1180591620717411303424"),
    ("convert_memory's host_staging=None", lambda: convert_memory(SIX, "numpy", "numpy", None, host_staging=None),
     TypeError, "convert_memory: host_staging must be True or False, not None"),
    ("a negative cache limit", lambda: ab.set_device_cache_limit(-1), ValueError,
     "set_device_cache_limit: limit_bytes must be from 0 to 2**64 - 1, not -1"),
    ("a negative NumPy cache limit", lambda: ab.set_device_cache_limit(np.int64(-1)), ValueError,
     "set_device_cache_limit: limit_bytes must be from 0 to 2**64 - 1, not -1"),
    ("set_staging of a float", lambda: ab.set_staging(2.0), TypeError, "set_staging: threads must be an int, not 2.0"),
    ("set_staging of a bool", lambda: ab.set_staging(True), TypeError, "set_staging: threads must be an int, not True"),
    ("an unknown device, from from_dlpack", lambda: ab.from_dlpack(SIX, device="gpu:0"), ValueError,
     "from_dlpack: unknown device 'gpu:0'; expected 'cpu', 'cuda:N', 'cuda_host', 'cuda_managed', 'opencl:N' or "
     "'dlpack_device_T:N'"),
    ("a copy mode that is no mode", lambda: ab.to_device(SIX, "cpu", copy=3), ValueError,
     "to_device: copy must be None, True or False, not 3"),
    ("no array at all", lambda: ab.from_dlpack([1, 2]), TypeError,
     "from_dlpack: x (a list) is neither a DLPack capsule nor an object with __dlpack__: pass an array (NumPy, "
     "CuPy, torch, JAX, TensorFlow, ...), an arraybridge Tensor or a DLPack capsule"),
    ("no array to copy into", lambda: ab.copy(SIX, "dst"), TypeError,
     "copy: dst (a str) is neither a DLPack capsule nor an object with __dlpack__: pass an array (NumPy, CuPy, "
     "torch, JAX, TensorFlow, ...), an arraybridge Tensor or a DLPack capsule"),
    ("a stream for a CPU transfer", lambda: ab.to_device(SIX, "cpu", stream=5), ValueError,
     "to_device: stream= names a DLPack stream, and neither side of this to_device has DLPack streams (its work "
     "is synchronous, or on the runtime's own queue with non_blocking=True: pass stream=None)"),
    ("shapes that differ", lambda: ab.copy(SIX, np.zeros(5, np.float32)), ab.InvalidArgumentError,
     "copy: source shape [6] differs from destination shape [5]"),
    ("a read-only destination", lambda: ab.copy(SIX, READ_ONLY), ab.DLPackError,
     "copy: destination is marked READ_ONLY; JAX and TensorFlow arrays are immutable, a legacy DLPack capsule "
     "cannot say it may be written, a read-only NumPy array says so, and a Tensor viewing a torch tensor that "
     "requires grad is autograd's (view its .detach() to write): copy into a writable array"),
    ("a destination whose elements alias",
     lambda: ab.copy(SIX.reshape(2, 3), np.lib.stride_tricks.as_strided(np.zeros(4, np.float32), (2, 3), (4, 4))),
     ab.DLPackError,
     "copy: destination: strides [1, 1] over shape [2, 3] give two elements the same memory: a destination's "
     "elements need memory of their own"),
    ("a device the runtime lacks", lambda: ab.to_device(SIX, "opencl:9"), ab.DeviceError,
     "to_device(opencl:9): destination: no device opencl:9 (the OpenCL backend has 1 device(s))"),
    ("a copy forbidden and needed", lambda: ab.to_device(SIX, "cpu", copy=False, dtype="float64"),
     ab.CopyRequiredError, "to_device(cpu): copy=False, but a copy is required: converting float32 -> float64"),
]


@pytest.mark.parametrize("what, call, kind, message", ROWS, ids=[row[0] for row in ROWS])
def test_a_bad_call_says_the_call_and_the_problem(what, call, kind, message):
    if "opencl:9" in message and len([d for d in ab.devices() if d.name.startswith("opencl:")]) != 1:
        pytest.skip("the message counts this machine's OpenCL devices (one here, PoCL)")
    with pytest.raises(kind) as error:
        call()
    assert str(error.value) == message
    assert "abr_" not in str(error.value).split(":")[0]  # the Python call, not the C entry point
    assert not str(error.value).startswith("arraybridge: ")
