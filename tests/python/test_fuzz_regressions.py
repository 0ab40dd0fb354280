"""Findings of the Python fuzz targets (tests/fuzz/python), each as a plain test;
the fuzz inputs themselves are replayed from tests/fuzz/python/regressions/."""
import ctypes
import pathlib
import subprocess
import sys

import arraybridge as ab
import numpy as np
import pytest

import handmade_dlpack as hd

HERE = str(pathlib.Path(__file__).parent)  # the children import handmade_dlpack from here, wherever pytest runs


def test_a_null_shape_is_refused_by_name_not_a_crash():
    # to_device read shape[] of ndim 1 with shape NULL to decide whether the copy was
    # small (is_small_host_copy), before the runtime validated it: a segfault. Run in
    # a child so the old behaviour fails this test instead of ending pytest.
    code = ("import sys; sys.path.insert(0, %r);" % HERE + " import handmade_dlpack as hd, arraybridge as ab\n"
            "h = hd.Handmade(ndim=1, shape=(4,), shape_null=True)\n"
            "c = h.capsule()\n"
            "try:\n    ab.to_device(c, 'cpu', copy=True)\nexcept ab.DLPackError as e:\n    print('refused:', e)\n"
            "print(hd.capsule_name(c), h.calls)\n")
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert child.returncode == 0, child.stderr[-2000:]
    assert "refused:" in child.stdout and "shape" in child.stdout
    assert child.stdout.splitlines()[-1] == "used_dltensor_versioned 1"  # consumed, then deleted once


@pytest.mark.parametrize("device", [(hd.OPENCL, 2**32), (hd.CPU, 2**70)])
def test_a_device_id_beyond_int32_is_refused_before_the_source_is_taken(device):
    # (opencl, 2**32) was cut to int32 and silently meant opencl:0; 2**70 raised OverflowError.
    data = (ctypes.c_float * 1)()
    h = hd.Handmade(data=ctypes.addressof(data))
    capsule = h.capsule()
    with pytest.raises(ValueError, match="device id"):
        ab.to_device(capsule, device)
    assert hd.capsule_name(capsule) == "dltensor_versioned" and h.calls == 0  # untouched


class _Stream:
    def __init__(self, ptr):
        self.ptr = ptr


@pytest.mark.parametrize("stream", [2**64, _Stream(-3), _Stream(2**64)])
def test_a_stream_beyond_a_pointer_is_a_value_error(stream):
    # PyLong_AsUnsignedLongLong raised OverflowError, which the package does not document.
    with pytest.raises(ValueError, match="stream"):
        ab.to_device(np.zeros(2, np.float32), "cpu", stream=stream)


def test_a_refused_batch_keeps_its_error_while_deleting_what_it_took():
    # The batch deleted the sources it had taken with the refusal's exception set: a
    # producer deleter running Python (ctypes here, NumPy's too) then starts with an
    # exception set (under atheris it failed, and the caller got SystemError).
    data = (ctypes.c_float * 4)()
    good = [hd.Handmade(versioned=v, data=ctypes.addressof(data), shape=(4,)) for v in (True, False)]
    with pytest.raises(TypeError, match="neither a DLPack capsule"):
        ab.to_device([h.capsule() for h in good] + [object()], "cpu")
    assert [h.calls for h in good] == [1, 1]  # each taken, each deleted once
    assert not any(h.called_with_error for h in good)


@pytest.mark.parametrize("versioned, flags", [(True, hd.READ_ONLY), (False, 0)])
def test_copy_many_refuses_a_read_only_destination_and_moves_nothing(versioned, flags):
    # abr_copy_many takes plain DLTensors, which carry no READ_ONLY flag: copy_many
    # (and copy of a structure) wrote into read-only capsules and read-only NumPy arrays.
    memory = (ctypes.c_float * 2)()
    h = hd.Handmade(versioned=versioned, flags=flags, data=ctypes.addressof(memory), shape=(2,))
    writable = np.zeros(2, np.float32)
    with pytest.raises(ab.DLPackError, match=r"dst\[1\] is marked READ_ONLY") as refused:
        ab.copy_many([np.ones(2, np.float32)] * 2, [writable, h.capsule()])
    assert refused.value.status_name == "ABR_ERR_READ_ONLY"
    assert list(memory) == [0.0, 0.0] and writable.tolist() == [0.0, 0.0]  # a bad pair moves nothing
    assert h.calls == 1 and not h.called_with_error  # taken, given back once
    read_only = np.zeros(2, np.float32)
    read_only.setflags(write=False)
    with pytest.raises(ab.DLPackError, match="READ_ONLY"):
        ab.copy({"a": np.ones(2, np.float32)}, {"a": read_only})
    assert read_only.tolist() == [0.0, 0.0]


def test_a_prev_api_cycle_ends_in_dlpack_not_a_hang():
    # find_api walked prev_api until it met major 1 or NULL: a header whose prev_api
    # leads back to itself never ended. Run in a child so the old behaviour fails.
    code = ("import sys, ctypes; sys.path.insert(0, %r);" % HERE + " import handmade_dlpack as hd, arraybridge as ab\n"
            "table = hd.exchange_table((2, 0))\n"
            "table.header.prev_api = ctypes.cast(ctypes.pointer(table.header), ctypes.POINTER(hd.DLPackExchangeAPIHeader))\n"
            "try:\n    ab.to_device(hd.framework_type(table)(), 'cpu')\nexcept TypeError as e:\n    print('refused:', e)\n")
    try:
        child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("to_device of a type whose exchange table's prev_api is a cycle did not return")
    assert child.returncode == 0, child.stderr[-2000:]
    assert "refused:" in child.stdout and "__dlpack__" in child.stdout  # fell back to __dlpack__, which it lacks


def test_a_failed_current_work_stream_is_a_buffer_error_and_the_tensor_goes_back_once():
    # It was a bare RuntimeError, which the package does not document for bad input.
    memory = (ctypes.c_float * 1)()
    h = hd.Handmade(data=ctypes.addressof(memory), device=(hd.CUDA, 0))

    def export(obj, out):
        out[0] = h.address
        return 0

    from_py_object = hd.FROM_PY_OBJECT(export)
    stream = hd.CURRENT_WORK_STREAM(lambda device_type, device_id, out: -1)
    framework = hd.framework_type(hd.exchange_table(from_py_object=from_py_object, current_work_stream=stream))
    with pytest.raises(BufferError, match="current stream"):
        ab.to_device(framework(), "cpu")
    assert h.calls == 1 and not h.called_with_error  # taken with success, so deleted once
