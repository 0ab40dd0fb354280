"""What the Python fuzz targets share: drawing a hand-made DLPack source and the
entry points' arguments from atheris's FuzzedDataProvider, and the invariants
every call must keep (tests/fuzz/python/README.md says which and why)."""
import ctypes
import gc
import math
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import handmade_dlpack as hd  # noqa: E402  (tests/python/handmade_dlpack.py)
import arraybridge as ab  # noqa: E402
from arraybridge._device import parse_device  # noqa: E402
from arraybridge._dtype import parse_dtype  # noqa: E402
from arraybridge._stream import stream_handle  # noqa: E402

# What the package documents it raises for bad input: its own errors (DLPackError is
# a BufferError, CopyRequiredError and InvalidArgumentError ValueErrors, ...) and
# TypeError / ValueError / BufferError for arguments it refuses before the runtime.
DOCUMENTED = (ab.ArrayBridgeError, TypeError, ValueError, BufferError)


class ProducerError(Exception):
    """Raised by a hand-made producer: it must reach the caller unchanged."""


def pick(fdp, values):
    return values[fdp.ConsumeIntInRange(0, len(values) - 1)]


def small_or(fdp, common, odd):
    """Mostly one of `common`, sometimes one of `odd` (boundary and garbage values)."""
    return pick(fdp, common) if fdp.ConsumeIntInRange(0, 3) else pick(fdp, odd)


_NUMPY = {(0, 8): np.int8, (0, 16): np.int16, (0, 32): np.int32, (0, 64): np.int64, (1, 8): np.uint8,
          (1, 16): np.uint16, (1, 32): np.uint32, (1, 64): np.uint64, (2, 16): np.float16, (2, 32): np.float32,
          (2, 64): np.float64, (5, 64): np.complex64, (5, 128): np.complex128, (6, 8): np.bool_}
HUGE = [2**31, 2**31 - 1, 2**32, 2**62, 2**63 - 1, -2**63, -1, -2]
MAX_SPAN = 1 << 16  # bytes of real memory a drawn source may span


class Source:
    """One drawn DLPack source: the Handmade tensor, the memory its data points
    into (or None), and the array its elements must read as (or None when the
    descriptor is not one NumPy can check, or has no real memory)."""

    def __init__(self, fdp, versioned=None, device=None):
        self.versioned = fdp.ConsumeBool() if versioned is None else versioned
        version = (small_or(fdp, [1], [0, 2, 2**32 - 1]), small_or(fdp, [0, 1, 3], [4, 2**32 - 1]))
        flags = small_or(fdp, [0, hd.READ_ONLY], [hd.IS_COPIED, hd.READ_ONLY | hd.IS_COPIED, 1 << 7, 2**64 - 1])
        ndim = small_or(fdp, [0, 1, 1, 2, 2, 3], [-1, 4, 33, 64, 65, 300, -2**31])
        shape = [small_or(fdp, [0, 1, 2, 3, 5], [-1] + HUGE) for _ in range(min(max(ndim, 0), 300))]
        strides = None if fdp.ConsumeBool() else [
            small_or(fdp, [1, 2, 3, -1, -2, 0], HUGE + [7, 64]) for _ in range(min(max(ndim, 0), 300))]
        code = small_or(fdp, [0, 1, 2, 2, 5, 6], [3, 4, 7, 255])
        bits = small_or(fdp, [8, 16, 32, 64], [0, 1, 4, 128, 255])
        lanes = small_or(fdp, [1], [0, 2, 4, 65535])
        device = device or (small_or(fdp, [hd.CPU], [hd.CUDA, hd.CUDA_HOST, hd.OPENCL, 0, 99, -1]),
                            small_or(fdp, [0], [1, -1, 2**31 - 1]))
        byte_offset = small_or(fdp, [0, 0, 4, 8], [1, 3, 2**63, 2**64 - 1])
        shape_null = ndim > 0 and not fdp.ConsumeIntInRange(0, 15)
        misalign = small_or(fdp, [0], [1, 2, 3])
        self.memory = None
        self.expected = None
        data = self._place(ndim, shape, strides, (code, bits, lanes), device, byte_offset, shape_null, misalign,
                           null=not fdp.ConsumeIntInRange(0, 15))
        self.tensor = hd.Handmade(self.versioned, version, flags, data, device, ndim, (code, bits, lanes), shape or [0],
                                  strides, byte_offset, shape_null, has_deleter=bool(fdp.ConsumeIntInRange(0, 15)))
        # What a consumer may assume the source says: a legacy capsule cannot say it may be written.
        self.read_only = not self.versioned or bool(flags & hd.READ_ONLY)
        self.valid_version = not self.versioned or version[0] == 1

    def _place(self, ndim, shape, strides, dtype, device, byte_offset, shape_null, misalign, null):
        """The data pointer: into real host memory that holds every element the
        descriptor reaches when it is small enough, else NULL (so a runtime that reads
        it anyway fails loudly rather than reading someone else's memory)."""
        code, bits, lanes = dtype
        item = (bits * lanes + 7) // 8
        if null or device[0] not in (hd.CPU, hd.CUDA_HOST) or not 0 <= ndim <= 64 or shape_null or item == 0:
            return None
        if any(s < 0 for s in shape):
            return None
        if strides is None:
            strides, step = [0] * ndim, 1
            for d in reversed(range(ndim)):
                strides[d], step = step, step * shape[d]
        numel = math.prod(shape)
        low = sum(min(0, (s - 1) * st) for s, st in zip(shape, strides)) * item if numel else 0
        high = sum(max(0, (s - 1) * st) for s, st in zip(shape, strides)) * item + item if numel else 0
        if high - low > MAX_SPAN or byte_offset > MAX_SPAN or numel * item > MAX_SPAN:
            return None
        self.memory = (ctypes.c_uint8 * (high - low + 64))()
        start = ctypes.addressof(self.memory) + misalign
        if dtype[:2] == (6, 8):
            ctypes.memmove(start, bytes(i % 2 for i in range(high - low)), high - low)
        else:
            ctypes.memmove(start, bytes((i * 37 + 11) & 0xFF for i in range(high - low)), high - low)
        data = start - low - byte_offset
        if data <= 0:
            self.memory = None
            return None
        numpy_type = _NUMPY.get((code, bits))
        if numpy_type is not None and lanes == 1 and all(abs(s) < 2**40 for s in strides) and math.prod(max(s, 1) for s in shape) < MAX_SPAN:
            flat = np.frombuffer(self.memory, dtype=np.uint8)[misalign:misalign + high - low]
            base = flat.view(numpy_type) if len(flat) % item == 0 and misalign == 0 else None
            if base is not None:
                self.expected = np.lib.stride_tricks.as_strided(base[-low // item:], shape,
                                                                [st * item for st in strides]).copy()
        return data

    @property
    def name(self):
        return hd.VERSIONED if self.versioned else hd.LEGACY


def draw_device(fdp):
    """A destination: mostly ones this machine has, sometimes malformed or absent."""
    return small_or(fdp, ["cpu", "cpu", "opencl:0", (hd.CPU, 0), (hd.OPENCL, 0)],
                    ["cuda_host", "cuda:0", "opencl:7", "opencl:", "opencl:-1", "opencl:2147483648", "cpu:1", "",
                     "c\x00pu", "\udcff", "OPENCL:0", "opencl:0x1", (hd.OPENCL, 2**32), (hd.CPU, -1), (99, 0),
                     (hd.CPU, 2**70), (2**70, 0), ("1", 0), (hd.CPU, True), [hd.CPU, 0], (hd.CPU,), None, 4.0,
                     fdp.ConsumeUnicode(8)])


def draw_copy(fdp):
    return small_or(fdp, [None, True, False], [0, 1, "yes", 2.5])


def draw_dtype(fdp):
    return small_or(fdp, [None, None, None, "float32", "int8", "float64"],
                    ["bool", "complex128", "uint16", "float16", "bfloat16", (2, 32, 1), (0, 8, 2), (2, 2**40, 1),
                     (-1, 8, 1), ("x", 1, 1), (2, 32), "nonsense", np.float16, object()])


def draw_stream(fdp):
    return small_or(fdp, [None], [-1, 0, 1, 2, -5, 2**64, 2**70, "s", 1.5, _StreamObject(-3), _StreamObject(2**64)])


class _StreamObject:
    """A framework's stream object as CuPy's: its handle in .ptr."""

    def __init__(self, ptr):
        self.ptr = ptr


def refused_before_import(device=None, copy=None, dtype=None, stream=None, check_device=True):
    """Whether the entry point must refuse these arguments before it touches its
    source: what the package parses first ("a bad argument leaves the caller's
    object untouched"). The package's own parsers say which are bad."""
    try:
        if check_device:
            kind, index = parse_device(device)
            if not 0 <= int(index) < 2**31:
                return True
        if copy is not None and copy is not True and copy is not False:
            return True
        if dtype is not None:
            code, bits, lanes = parse_dtype(dtype)
            if not (0 <= code <= 255 and 0 <= bits <= 255 and 0 <= lanes <= 65535):
                return True
        if stream is not None and not 0 <= stream_handle(stream) < 2**64:
            return True
    except Exception:
        return True
    return False


def check_exception(error, producer_raised=False):
    """A failure must be a documented exception (or the producer's own, passed on)."""
    if isinstance(error, DOCUMENTED) or (producer_raised and isinstance(error, ProducerError)):
        return
    raise AssertionError(f"undocumented exception {type(error).__name__}: {error}") from error


def host_values(result):
    """A Tensor's elements as a NumPy array (copied to the CPU first when on a device)."""
    if result.device not in ("cpu", "cuda_host"):
        result = ab.to_device(result, "cpu")
    return np.from_dlpack(result)


def check_values(result, source, cast):
    """A successful transfer of a source with real memory shows the source's elements."""
    if source.expected is None or cast is not None:
        return
    got = host_values(result)
    assert got.shape == source.expected.shape, (got.shape, source.expected.shape)
    assert got.dtype == source.expected.dtype, (got.dtype, source.expected.dtype)
    assert np.ascontiguousarray(got).tobytes() == source.expected.tobytes(), "the values changed on the way"


def settle(source, seconds=5.0):
    """Waits until the source's deleter ran: queued work (non_blocking) lets go of
    its source when it completes, on another thread, and a pending call finishes it."""
    deadline = time.monotonic() + seconds
    gc.collect()
    while source.tensor.calls == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
        gc.collect()


def check_capsule(capsule, source, untouched):
    """A capsule handed in is either untouched (its name, no deleter call: then it is
    ours to delete, as its destructor would) or consumed (renamed used_*, and the
    consumer calls the deleter exactly once once it lets go)."""
    name = hd.capsule_name(capsule)
    if untouched:
        assert name == source.name.decode(), f"refused before import, yet the capsule was renamed {name}"
    if name == source.name.decode():
        assert source.tensor.calls == 0, f"not consumed, yet its deleter ran {source.tensor.calls} times"
        source.tensor.delete()
    else:
        assert name == "used_" + source.name.decode(), f"capsule renamed {name}"


def check_deleter(source):
    """After everything was dropped, a tensor with a deleter was deleted exactly once."""
    if source.tensor._deleter:
        if source.tensor.calls != 1:
            settle(source)
        assert source.tensor.calls == 1, f"deleter called {source.tensor.calls} times"
