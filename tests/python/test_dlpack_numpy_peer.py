"""NumPy's own DLPack tests (numpy/_core/tests/test_dlpack.py, NumPy 2.4), restated
in our words with an arraybridge Tensor on each side: as the producer NumPy consumes
(np.from_dlpack(tensor)) and as the consumer of NumPy's arrays (ab.from_dlpack /
ab.to_device). NumPy's expectations are kept (values, dtypes, refcounts, exception
types) except where the array API standard says otherwise, as noted at each place."""
import os
import sys

import numpy as np
import pytest

import arraybridge as ab

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, np.float16,
          np.float32, np.float64, np.complex64, np.complex128]


class LegacyOnly(np.ndarray):
    """A producer that predates DLPack 1.0: __dlpack__ takes only a stream."""

    def __dlpack__(self, stream=None):
        return super().__dlpack__(stream=None)


def producers():
    """A NumPy array, and the same as a producer of legacy capsules only."""
    return [np.arange(5), np.arange(5).view(LegacyOnly)]


def tensor(values):
    return ab.from_dlpack(np.ascontiguousarray(values))


# ------------------------------------------------------------ our Tensor as producer

@pytest.mark.parametrize("max_version", [(0, 0), None, (1, 0), (100, 3)])
def test_a_capsule_holds_one_reference_to_its_tensor(max_version):
    t = tensor(np.arange(5))
    capsule = t.__dlpack__(max_version=max_version)
    before = sys.getrefcount(t)
    del capsule
    assert before - sys.getrefcount(t) == 1


CONSUMER_DELETES_WITHOUT_RENAMING = """
import ctypes, gc, sys, threading
import numpy as np, arraybridge as ab
get = ctypes.pythonapi.PyCapsule_GetPointer
get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
deleter_type = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # called without the GIL, as ctypes calls C
t = ab.to_device(np.arange(6, dtype=np.float32), sys.argv[1])
start = sys.getrefcount(t)
def rounds():
    for round in range(200):
        versioned = round % 2 == 0
        capsule = t.__dlpack__(max_version=(1, 0) if versioned else None)
        name = b"dltensor_versioned" if versioned else b"dltensor"
        managed = get(capsule, name)
        # the deleter's place: after version and manager_ctx, or after the 48-byte DLTensor
        deleter = ctypes.c_void_p.from_address(managed + (16 if versioned else 56)).value
        deleter_type(deleter)(managed)  # as torch's from_dlpack does when it fails part way
        del capsule
        gc.collect()
if sys.argv[2] == "main":
    rounds()
else:  # a thread that runs no pending calls: each deleter's finish waits until the capsule is gone
    worker = threading.Thread(target=rounds)
    worker.start()
    worker.join()
ab.to_device(np.zeros(1), "cpu")  # drains the finishes still queued
gc.collect()
print(start - sys.getrefcount(t))
"""


@pytest.mark.parametrize("thread", ["main", "worker"])
@pytest.mark.parametrize("device", ["cpu", "opencl:0"])
def test_a_consumer_that_deletes_without_renaming_the_capsule_frees_once(device, thread):
    """torch.from_dlpack of an opencl:0 Tensor fails part way, calls the capsule's
    deleter and leaves it named dltensor_versioned: the capsule's destructor then
    deleted the view again (a segfault the second time, a reference lost each time).
    On a thread without the GIL's pending calls the destructor ran before the first
    deletion's finish, and deleted again (a segfault until the deleter itself ended
    the view's generation)."""
    import subprocess
    done = subprocess.run([sys.executable, "-c", CONSUMER_DELETES_WITHOUT_RENAMING, device, thread],
                          capture_output=True, text=True, timeout=120, env=dict(os.environ, PYTHONMALLOC="debug"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["0"]


def test_stream_on_a_cpu_tensor():
    t = tensor(np.arange(5))
    t.__dlpack__(stream=None)
    # NumPy raises RuntimeError; the standard keeps BufferError for data that cannot be
    # exported and names no type for a wrong argument, so we follow NumPy (our error is
    # also an ArrayBridgeError).
    with pytest.raises(RuntimeError, match="stream=1 given for a tensor on cpu") as error:
        t.__dlpack__(stream=1)
    assert isinstance(error.value, ab.ArrayBridgeError)


def test_copy_argument_is_parsed():
    t = tensor(np.arange(5))
    for copy in (True, None, False):
        capsule = t.__dlpack__(copy=copy, max_version=(1, 0))
        np.testing.assert_array_equal(np.from_dlpack(ab.from_dlpack(capsule)), np.arange(5))
    with pytest.raises(ValueError):
        t.__dlpack__(copy=np.array([1, 2, 3]))


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_passes_through_both_ways(dtype):
    for producer in producers():
        x = producer.astype(dtype)
        ours = ab.from_dlpack(x)  # we consume NumPy's (or the legacy producer's) capsule
        assert ours.dtype == np.dtype(dtype).name
        y = np.from_dlpack(ours)  # NumPy consumes ours
        assert y.dtype == x.dtype
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("producer", producers(), ids=["versioned", "legacy"])
def test_taking_a_producer_adds_one_reference_while_held(producer):
    x = producer.copy()
    held = ab.from_dlpack(x)
    before = sys.getrefcount(x)
    del held
    assert before - sys.getrefcount(x) == 1


def test_what_dlpack_cannot_describe_is_a_buffer_error():
    record = np.zeros(5, dtype=[("int", np.int32), ("char", np.int8)])["int"]  # strides not a multiple of 4
    for bad in [record, np.asarray(np.datetime64("2021-05-27")), np.arange(5, dtype=np.dtype("=i8").newbyteorder())]:
        with pytest.raises(BufferError):
            ab.from_dlpack(bad)


def test_non_contiguous_views_round_trip():
    x = np.arange(25).reshape(5, 5)
    for view in [x[0], x[:, 0], x[1, :], x[1], np.diagonal(x), x[::-2, 1::2], x.T]:
        ours = ab.from_dlpack(view)
        np.testing.assert_array_equal(np.from_dlpack(ours), view)
        np.testing.assert_array_equal(np.from_dlpack(ab.to_device(view, "cpu", copy=True)), view)


@pytest.mark.parametrize("ndim", range(33))
def test_up_to_32_dimensions(ndim):
    shape = (1,) * ndim
    ours = ab.from_dlpack(np.zeros(shape))
    assert ours.shape == shape
    assert np.from_dlpack(ours).shape == shape


def test_dlpack_device():
    t = tensor(np.arange(5))
    assert t.__dlpack_device__() == (1, 0)
    assert np.from_dlpack(t).__dlpack_device__() == (1, 0)
    assert ab.from_dlpack(np.from_dlpack(t)[::2]).__dlpack_device__() == (1, 0)


@pytest.mark.parametrize("max_version", [None, (1, 0)])
def test_an_unused_capsule_in_a_failing_frame_keeps_the_exception(max_version):
    def fails():
        _ = tensor(np.arange(5)).__dlpack__(max_version=max_version)
        raise RuntimeError("the caller's")

    with pytest.raises(RuntimeError, match="the caller's"):
        fails()


def test_read_only_is_kept_and_a_legacy_capsule_cannot_carry_it():
    x = np.arange(5)
    x.flags.writeable = False
    ours = ab.from_dlpack(x)
    assert ours.read_only
    assert not np.from_dlpack(ours).flags.writeable
    # A legacy capsule cannot say read-only. NumPy refuses to export one; the standard
    # lets a producer copy when copy=None, so we hand a copy of its own to a legacy
    # consumer (JAX asks so), and refuse only when copy=False forbids the copy.
    legacy = ab.from_dlpack(ours.__dlpack__())
    np.testing.assert_array_equal(np.from_dlpack(legacy), x)
    assert not np.shares_memory(np.from_dlpack(legacy), x)
    with pytest.raises(BufferError, match="copy=False forbids a copy"):
        ours.__dlpack__(copy=False)


def test_writable_only_when_the_producer_says_so():
    versioned, legacy = producers()
    assert np.from_dlpack(ab.from_dlpack(versioned)).flags.writeable
    # A legacy producer cannot say its data may be written: read-only, as NumPy does.
    assert not np.from_dlpack(ab.from_dlpack(legacy)).flags.writeable


def test_zero_dimensions_and_size_one_strides():
    x = np.array(1.0)
    np.testing.assert_array_equal(np.from_dlpack(ab.from_dlpack(x)), x)
    odd = np.ndarray(dtype="f8", shape=(10, 5, 1), strides=(8, 80, 4), buffer=np.ones(1000, dtype=np.uint8),
                     order="F")
    np.testing.assert_array_equal(np.from_dlpack(ab.from_dlpack(odd)), odd)


def test_copy_or_share():
    x = np.arange(5)
    assert np.may_share_memory(x, np.from_dlpack(ab.from_dlpack(x)))
    assert np.may_share_memory(x, np.from_dlpack(ab.from_dlpack(x, copy=False)))
    assert not np.may_share_memory(x, np.from_dlpack(ab.from_dlpack(x, copy=True)))
    t = tensor(np.arange(5))
    assert not np.may_share_memory(np.from_dlpack(t), np.from_dlpack(t, copy=True))


def test_devices_asked_for():
    t = tensor(np.arange(5))
    t.__dlpack__(dl_device=(1, 0))
    np.testing.assert_array_equal(np.from_dlpack(t, device="cpu"), np.arange(5))
    np.from_dlpack(t, device=None)
    # A device the producer cannot export to: BufferError, as the standard and NumPy say.
    with pytest.raises(BufferError, match="dlpack_device_10:0"):
        t.__dlpack__(dl_device=(10, 0))
    with pytest.raises(ValueError):
        ab.from_dlpack(np.arange(5), device="gpu")
