"""Findings of the Python fuzz targets (tests/fuzz/python), each as a plain test;
the fuzz inputs themselves are replayed from tests/fuzz/python/regressions/."""
import ctypes
import subprocess
import sys

import arraybridge as ab
import numpy as np
import pytest

import handmade_dlpack as hd


def test_a_null_shape_is_refused_by_name_not_a_crash():
    # to_device read shape[] of ndim 1 with shape NULL to decide whether the copy was
    # small (is_small_host_copy), before the runtime validated it: a segfault. Run in
    # a child so the old behaviour fails this test instead of ending pytest.
    code = ("import sys; sys.path.insert(0, 'tests/python'); import handmade_dlpack as hd, arraybridge as ab\n"
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
