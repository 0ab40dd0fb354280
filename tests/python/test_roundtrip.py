"""Round trips through every device, dtype and layout, with values checked."""
import numpy as np
import pytest

import arraybridge as ab
from conftest import DEVICES, DTYPES, data_pointer, requires_cuda, sample, threads_convert_their_own_values, views

LAYOUTS = list(views(sample("int32")).keys())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_round_trip_keeps_values(device, dtype, layout):
    source = views(sample(dtype))[layout]
    moved = ab.to_device(source, device)
    assert moved.device == device
    assert moved.shape == source.shape
    assert moved.dtype == dtype
    back = np.from_dlpack(ab.to_device(moved, "cpu"))
    assert back.dtype == source.dtype
    assert back.shape == source.shape
    np.testing.assert_array_equal(back, source)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_cpu_to_cpu_is_zero_copy_with_the_same_pointer_and_strides(layout):
    source = views(sample("float64"))[layout]
    tensor = ab.to_device(source, "cpu")
    assert tensor.report.path == "zero_copy"
    assert tensor.report.bytes_moved == 0
    back = np.from_dlpack(tensor)
    if source.size:
        assert data_pointer(back) == data_pointer(source)
        assert back.strides == source.strides
    if source.size:  # a view, not a copy: writes show through
        first = np.unravel_index(0, source.shape) if source.ndim else ()
        source[first] = 42.0
        assert back[first] == 42.0


def test_from_dlpack_alone_is_a_zero_copy_import():
    source = sample("int16")
    tensor = ab.from_dlpack(source)
    assert tensor.report.path == "zero_copy"
    assert tensor.device == "cpu"
    assert data_pointer(np.from_dlpack(tensor)) == data_pointer(source)


def test_copy_true_makes_a_new_buffer_and_copy_false_refuses_a_copy():
    source = sample("float32")
    copied = ab.to_device(source, "cpu", copy=True)
    assert copied.report.path == "host_copy"
    back = np.from_dlpack(copied)
    assert data_pointer(back) != data_pointer(source)
    np.testing.assert_array_equal(back, source)
    assert ab.to_device(source, "cpu", copy=False).report.path == "zero_copy"
    with pytest.raises(ValueError, match="copy") as error:
        ab.to_device(source, "cpu", copy=False, dtype="float64")
    assert isinstance(error.value, ab.CopyRequiredError)
    assert error.value.status_name == "ABR_ERR_COPY_REQUIRED"


def test_dtype_conversion_on_the_way():
    source = np.arange(-3, 9, dtype=np.int32).reshape(3, 4)[:, ::-1]
    tensor = ab.to_device(source, "opencl:0", dtype="float64")
    assert tensor.dtype == "float64" and tensor.report.cast
    np.testing.assert_array_equal(np.from_dlpack(tensor.to("cpu")), source.astype(np.float64))


def test_strict_allows_direct_paths():
    source = sample("uint8")
    for device in DEVICES:
        back = np.from_dlpack(ab.to_device(ab.to_device(source, device, host_staging=False), "cpu", host_staging=False))
        np.testing.assert_array_equal(back, source)


def test_read_only_is_carried_both_ways():
    source = sample("int64")
    source.flags.writeable = False
    tensor = ab.to_device(source, "cpu")
    assert tensor.read_only
    back = np.from_dlpack(tensor)
    assert not back.flags.writeable
    assert data_pointer(back) == data_pointer(source)
    copy = ab.to_device(source, "opencl:0", copy=True)  # a copy on a device is a new, writable buffer
    assert copy.report.path != "host_wrap" and not copy.read_only
    # Without copy=True, PoCL may use the host memory in place when it happens to be
    # aligned enough (host_wrap): then the view stays read-only.
    moved = ab.to_device(source, "opencl:0")
    assert moved.read_only == (moved.report.path == "host_wrap")


@requires_cuda
def test_eight_threads_on_a_real_gpu_after_a_large_pageable_round_trip_get_their_own_values():
    # The H100 report of issue 17 (the fake driver's version is in test_cuda_fake.py):
    # a large pageable round trip fills the pinned pool, then 8 threads convert a
    # transposed 65x64 int64 array of their own value; one got another's before the fix.
    threads_convert_their_own_values(256 << 20, rounds=20)
