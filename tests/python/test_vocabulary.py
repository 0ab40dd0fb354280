"""One vocabulary from C to Python: device and dtype names, status values and
their classes all come from the library, and only _core holds its pointers."""
import pathlib
import re

import numpy as np
import pytest

import arraybridge as ab
from arraybridge import _core, _device, _dtype, _errors, _kinds, _runtime
from arraybridge._lib import ffi, lib


def _c_device_name(kind, index):
    out = ffi.new("char[]", lib.ABR_NAME_MAX)
    assert lib.abr_device_format((kind, index), out, lib.ABR_NAME_MAX) == lib.ABR_OK
    return ffi.string(out).decode()


def test_device_names_are_the_librarys():
    for kind, index in [(1, 0), (2, 3), (3, 0), (4, 1), (13, 0), (9, 0), (10, 2)]:
        assert _device.device_string(kind, index) == _c_device_name(kind, index)
    assert _device.device_string(9, 0) == "dlpack_device_9:0"  # the C side's fallback, not a Python one
    assert _device.parse_device(" CUDA_HOST ") == (ab.DLDeviceType.CUDA_HOST, 0)
    assert _device.parse_device("opencl:2") == (ab.DLDeviceType.OPENCL, 2)
    with pytest.raises(ValueError, match="unknown device 'tpu:0'"):
        _device.parse_device("tpu:0")
    with pytest.raises(ValueError, match="its only index is 0"):
        _device.parse_device("cuda_host:1")


DLPACK_H = pathlib.Path(__file__).resolve().parents[2] / "include" / "arraybridge" / "dlpack.h"


def test_device_types_are_dlpack_h_values_from_the_librarys_kind_table():
    # The package names no device type itself: dlpack.h's values come through the kind table.
    value = {name: int(number) for name, number in re.findall(r"^\s+(kDL\w+) = (\d+),", DLPACK_H.read_text(), re.M)}
    assert [(t.name, int(t)) for t in ab.DLDeviceType] == [
        ("CPU", value["kDLCPU"]), ("CUDA", value["kDLCUDA"]), ("CUDA_HOST", value["kDLCUDAHost"]),
        ("CUDA_MANAGED", value["kDLCUDAManaged"]), ("OPENCL", value["kDLOpenCL"])]
    # Which queue orders each kind's work, and whose data is a handle, come from it too.
    assert _kinds.DLPACK_STREAMS == {ab.DLDeviceType.CUDA}
    assert _kinds.HANDLES == {ab.DLDeviceType.OPENCL}
    count = ffi.new("int32_t*")
    assert lib.abr_device_kind_count(count) == lib.ABR_OK and count[0] == len(ab.DLDeviceType)
    # The backends and the variables that disable them come from the same table.
    assert _kinds.BACKENDS == {lib.ABR_BACKEND_HOST: "host", lib.ABR_BACKEND_CUDA: "cuda",
                               lib.ABR_BACKEND_OPENCL: "opencl"}
    assert _kinds.DISABLING == {"ARRAYBRIDGE_DISABLE_CUDA": lib.ABR_RUNTIME_DISABLE_CUDA,
                                "ARRAYBRIDGE_DISABLE_OPENCL": lib.ABR_RUNTIME_DISABLE_OPENCL}


def test_runtime_flags_follow_the_disabling_variables(monkeypatch):
    monkeypatch.setenv("ARRAYBRIDGE_DISABLE_OPENCL", "1")
    monkeypatch.setenv("ARRAYBRIDGE_DISABLE_CUDA", "0")
    assert _runtime.runtime_flags() == lib.ABR_RUNTIME_DISABLE_OPENCL
    monkeypatch.setenv("ARRAYBRIDGE_DISABLE_CUDA", "yes")
    assert _runtime.runtime_flags() == lib.ABR_RUNTIME_DISABLE_OPENCL | lib.ABR_RUNTIME_DISABLE_CUDA
    for no in ("false", "No", " off", "0 "):  # =false disabled CUDA (the process hunt)
        monkeypatch.setenv("ARRAYBRIDGE_DISABLE_CUDA", no)
        assert _runtime.runtime_flags() == lib.ABR_RUNTIME_DISABLE_OPENCL, no


def test_dtype_names_are_the_librarys():
    assert _dtype.parse_dtype("float32x4") == (2, 32, 4)
    assert _dtype.dtype_name(2, 32, 4) == "float32x4"
    assert _dtype.dtype_name(99, 8, 1) == "dlpack_dtype_99_8"
    assert _dtype.parse_dtype(np.dtype("complex64")) == (5, 64, 1)
    assert _dtype.parse_dtype(np.uint16) == (1, 16, 1)
    assert _dtype.parse_dtype("float8_e4m3fn") == (10, 8, 1)  # dlpack.h: kDLFloat8_e4m3fn = 10
    with pytest.raises(ValueError, match="unknown dtype 'real32'"):
        _dtype.parse_dtype("real32")


def test_every_status_of_the_header_has_its_class():
    statuses = {name: getattr(lib, name) for name in dir(lib) if name.startswith("ABR_ERR_")}
    assert len(statuses) >= 19
    for name, status in statuses.items():
        assert _errors.status_name(status) == name
        cls = _errors.class_for_status(status)
        assert issubclass(cls, ab.ArrayBridgeError)
        if name.startswith("ABR_ERR_DLPACK_"):
            assert cls is ab.DLPackError
    assert _errors.class_for_status(lib.ABR_ERR_COPY_REQUIRED) is ab.CopyRequiredError
    assert _errors.class_for_status(lib.ABR_ERR_NO_DEVICE) is ab.DeviceError
    assert _errors.class_for_status(-12345) is ab.ArrayBridgeError


def test_tensor_describes_itself_in_c_and_holds_its_pointer_there():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    t = ab.to_device(a, "cpu")
    assert (t.shape, t.ndim, t.strides, t.dtype, t.itemsize, t.device) == ((3, 2), 2, (4, 2), "float32", 4, "cpu")
    assert t.data_ptr + t.byte_offset == a.ctypes.data
    assert not hasattr(t, "_addr")  # no pointer leaves _core as an integer
    assert not hasattr(_runtime, "runtime") and not hasattr(_runtime, "current")  # the runtime is _core's alone
    assert [d.name for d in ab.devices()][0] == "cpu"
    assert {b.name for b in ab.backends()} == {"host", "cuda", "opencl"}
    assert set(_core.pool_stats()) and isinstance(ab.pool_stats()["hits"], int)
