"""The C half of the binding (arraybridge._core): argument handling, the device
cache, the __dlpack__ fast path against the slow one, and the DEBUG log line."""
import gc
import logging
import sys
import threading
import time
import weakref

import numpy as np
import pytest

import arraybridge as ab
from arraybridge import _core, _transfer
from conftest import capsule_flags, data_pointer, sample


def test_arguments_are_checked_like_a_python_signature():
    source = sample("int32")
    with pytest.raises(TypeError, match="missing required argument 'device'"):
        ab.to_device(source)
    with pytest.raises(TypeError, match="2 positional arguments but 3"):
        ab.to_device(source, "cpu", None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'cpoy'"):
        ab.to_device(source, "cpu", cpoy=True)
    with pytest.raises(TypeError, match="multiple values for argument 'device'"):
        ab.to_device(source, "cpu", device="cpu")
    with pytest.raises(TypeError, match="unexpected keyword argument 'dtype'"):
        ab.from_dlpack(source, dtype="int8")
    with pytest.raises(ValueError, match="copy must be None, True or False, not 1"):
        ab.to_device(source, "cpu", copy=1)
    # Everything by keyword, in any order, as the signature allows.
    moved = ab.to_device(contiguous=False, host_staging=False, device="cpu", x=source, copy=None, dtype=None, stream=None)
    assert moved.report.path == "zero_copy"
    assert ab.to_device.__text_signature__.startswith("(x, device, *, copy=None")
    assert "Move any DLPack array" in ab.to_device.__doc__


# The callables the package registers, from what it gives setup (not the type, logger or flags).
HOOKS = tuple(name for name in _transfer._SETUP if name not in ("tensor_type", "logger", "runtime_flags"))


def test_a_setup_that_fails_changes_no_hook():
    def broken(*args, **kwargs):
        raise AssertionError("a hook of a failed setup() was installed")
    with pytest.raises(TypeError, match="tensor_type must subclass _core.TensorBase"):
        _core.setup(tensor_type=object, **{name: broken for name in HOOKS})
    with pytest.raises(TypeError, match="setup\\(\\) needs copy_structure"):
        _core.setup(tensor_type=ab.Tensor, **{name: broken for name in HOOKS if name != "copy_structure"})
    with pytest.raises(TypeError, match="read_only_why must be a str"):
        _core.setup(**dict(_transfer._SETUP, error=broken, read_only_why=broken))
    source = sample("int32")  # every hook still the package's own
    np.testing.assert_array_equal(np.from_dlpack(ab.to_device([source], "cpu", copy=True)[0]), source)
    with pytest.raises(ab.CopyRequiredError, match="a copy is required"):  # made by the error hook
        ab.to_device(source, "cpu", dtype="float64", copy=False)


def test_a_bad_argument_leaves_the_source_unconsumed():
    capsule = sample("int16").__dlpack__(max_version=(1, 0))
    for bad in ({"copy": "maybe"}, {"dtype": "no-such-type"}, {"stream": 0}):
        with pytest.raises((TypeError, ValueError)):
            ab.to_device(capsule, "opencl:0", **bad)
        assert _core.capsule_name(capsule) == "dltensor_versioned"  # still the caller's
    assert ab.to_device(capsule, "cpu").report.path == "zero_copy"
    assert _core.capsule_name(capsule) == "used_dltensor_versioned"


def test_device_strings_are_parsed_once_and_bad_ones_fail_every_time():
    source = sample("float32")
    for _ in range(3):  # the cache must not remember failures
        with pytest.raises(ValueError, match="unknown device 'gpu'"):
            ab.to_device(source, "gpu")
    names = ["opencl:0", "OpenCL:0", " opencl:0 ", "cpu", "opencl:0"]
    assert [ab.to_device(source, name).device for name in names] == \
           ["opencl:0", "opencl:0", "opencl:0", "cpu", "opencl:0"]
    built = "".join(["open", "cl:0"])  # an equal string that is another object
    assert ab.to_device(source, built).device == "opencl:0"


def test_dlpack_fast_and_slow_paths_agree():
    source = sample("float64")
    tensor = ab.from_dlpack(source)
    own = tensor.__dlpack_device__()
    # The fast path: nothing asked, or this very device, or copy=False.
    for kwargs in ({}, {"max_version": (1, 0)}, {"dl_device": own, "max_version": (1, 3)},
                   {"dl_device": (int(own[0]), own[1]), "copy": False, "max_version": (1, 0)}):
        back = np.from_dlpack(_Producer(tensor, kwargs))
        assert data_pointer(back) == data_pointer(source)
    # The slow path: a copy, another device, a stream value, odd max_version values.
    assert capsule_flags(tensor.__dlpack__(max_version=(1, 0), copy=True)) == 2
    pulled = tensor.__dlpack__(max_version=(1, 0), dl_device=(ab.DLDeviceType.OPENCL, 0))
    assert capsule_flags(pulled) == 2
    with pytest.raises(ab.StreamError, match="stream"):  # a RuntimeError, as NumPy's
        tensor.__dlpack__(stream=1)
    for odd in ("1.0", (1,), (1, 0, 0), [1, 0], ("1", 0), (1, None), (np.int64(1), 0)):  # a TypeError, as NumPy's
        with pytest.raises(TypeError, match=r"max_version is None or a \(major, minor\) tuple of two ints"):
            tensor.__dlpack__(max_version=odd)
    assert type(tensor.__dlpack__(max_version=(-1, 0))).__name__ == "PyCapsule"  # legacy, as NumPy gives
    with pytest.raises(TypeError, match="positional"):
        tensor.__dlpack__(None)
    with pytest.raises(TypeError, match="unexpected keyword"):
        tensor.__dlpack__(version=(1, 0))


class _Producer:
    """Hands `tensor.__dlpack__(**kwargs)` to a consumer."""

    def __init__(self, tensor, kwargs):
        self.tensor, self.kwargs = tensor, kwargs

    def __dlpack__(self, **ignored):
        return self.tensor.__dlpack__(**self.kwargs)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


def test_the_debug_line_follows_the_logger_level(caplog):
    logger = logging.getLogger("arraybridge")
    source = sample("int8")
    with caplog.at_level(logging.INFO, logger="arraybridge"):
        ab.to_device(source, "cpu")  # fills the logger's cache with "DEBUG is off"
    assert not [r for r in caplog.records if r.name == "arraybridge"]
    with caplog.at_level(logging.DEBUG, logger="arraybridge"):  # setLevel clears that cache
        ab.to_device(source, "opencl:0")
        ab.from_dlpack(source)
    lines = [r.getMessage() for r in caplog.records if r.name == "arraybridge"]
    assert len(lines) == 2
    assert lines[0].startswith("to_device to opencl:0: ") and "bytes" in lines[0]
    assert lines[1].startswith("from_dlpack to cpu: zero_copy, 0 bytes: view of cpu memory")
    assert not logger.isEnabledFor(logging.DEBUG) or logger.level == logging.DEBUG


def test_a_copy_releases_the_gil():
    # With a switch interval of minutes, a waiting thread gets the GIL only when the
    # holder lets go of it: here, only inside the copy, if the copy releases it. The
    # copy (128 MiB, tens of ms) leaves the OS time to run the woken thread even on a
    # loaded 2-core machine.
    big = np.ones(1 << 25, dtype=np.float32)
    woke, stamp = threading.Event(), []

    def waiter():
        woke.wait()
        stamp.append(time.perf_counter())

    thread = threading.Thread(target=waiter)
    thread.start()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(600)
    try:
        woke.set()
        ab.to_device(big, "cpu", copy=True)
        copied = time.perf_counter()
    finally:
        sys.setswitchinterval(interval)
        thread.join()
    assert stamp and stamp[0] < copied, "the waiting thread ran only after the copy: the GIL was held"


def test_copy_writes_into_an_existing_array_and_leaves_both_with_the_caller():
    import sys as _sys
    target = np.zeros((6, 4), dtype=np.float64)[::2].T  # strided destination, (4, 3)
    source = sample("int32", (4, 3))
    before = (_sys.getrefcount(source), _sys.getrefcount(target.base))
    ab.copy(source, target)
    np.testing.assert_array_equal(target, source.astype(np.float64))
    assert (_sys.getrefcount(source), _sys.getrefcount(target.base)) == before  # both released once
    on_device = ab.to_device(sample("float32", (4, 3)), "opencl:0")
    ab.copy(on_device, target)  # from device memory, converted
    np.testing.assert_array_equal(target, sample("float32", (4, 3)).astype(np.float64))
    frozen = np.zeros((4, 3), dtype=np.float64)
    frozen.flags.writeable = False
    with pytest.raises(ab.ArrayBridgeError, match="READ_ONLY") as error:
        ab.copy(source, frozen)
    assert error.value.status_name == "ABR_ERR_READ_ONLY"
    with pytest.raises(ab.ArrayBridgeError, match="shape"):
        ab.copy(source, np.zeros((3, 4)))
    with pytest.raises(TypeError, match="missing required argument 'dst'"):
        ab.copy(source)


def test_tensor_is_a_final_type_the_cycle_collector_does_not_track():
    # A class statement makes instances the cycle collector tracks; _core rebuilds
    # Tensor without that (it holds no Python references), keeping its attributes.
    tensor = ab.to_device(np.arange(6.0).reshape(2, 3), "cpu")
    assert type(tensor) is ab.Tensor and isinstance(tensor, _core.TensorBase)
    assert (ab.Tensor.__module__, ab.Tensor.__name__) == ("arraybridge", "Tensor")
    assert not gc.is_tracked(tensor)
    assert "A tensor owned by arraybridge" in ab.Tensor.__doc__
    assert repr(tensor).startswith("arraybridge.Tensor(shape=(2, 3), dtype=float64")
    assert tensor.shape == (2, 3) and tensor.report.path == "zero_copy"
    alive = weakref.ref(tensor)
    del tensor
    assert alive() is None
    before = sys.getrefcount(ab.Tensor)  # each instance holds its heap type once, until it dies
    for _ in range(1000):
        ab.to_device(np.ones(3), "cpu")
    after = sys.getrefcount(ab.Tensor)  # outside the assert, whose rewriting holds a reference of its own
    assert after == before
    with pytest.raises(TypeError):
        type("Sub", (ab.Tensor,), {})
    with pytest.raises(TypeError, match="__slots__"):
        _core.untracked_type(type("Fat", (_core.TensorBase,), {}))
