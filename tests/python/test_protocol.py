"""The DLPack protocol both ways: capsules, keywords, flags and errors."""
import ctypes
import hashlib
import io
import os
import subprocess
import sys
import types

import numpy as np
import pytest

import arraybridge as ab
from arraybridge import _core
from conftest import capsule_flags, data_pointer, sample

READ_ONLY, IS_COPIED = 1, 2


def test_dlpack_device_and_description():
    tensor = ab.to_device(sample("float32", (2, 3)), "opencl:0")
    assert tensor.__dlpack_device__() == (ab.DLDeviceType.OPENCL, 0)
    assert (tensor.shape, tensor.dtype, tensor.device, tensor.ndim, tensor.size, tensor.nbytes) == \
           ((2, 3), "float32", "opencl:0", 2, 6, 24)
    assert repr(tensor).startswith("arraybridge.Tensor(shape=(2, 3), dtype=float32, device=opencl:0, path=")
    with pytest.raises(TypeError, match="to_device"):
        ab.Tensor()


def test_host_tensors_have_the_buffer_protocol_in_place():
    values = sample("float32", (3, 4))
    tensor = ab.to_device(values, "cpu")  # a view of `values`
    view = memoryview(tensor)
    assert (view.format, view.shape, view.strides, view.readonly, view.nbytes) == ("f", (3, 4), (16, 4), False, 48)
    view[1, 2] = 42.0
    assert values[1, 2] == 42.0  # the same memory
    for dtype, code in (("int8", "b"), ("uint16", "H"), ("int64", np.dtype(np.int64).char), ("float64", "d"),
                        ("complex128", "Zd"), ("bool", "?")):
        assert memoryview(ab.to_device(sample(dtype, (2,)), "cpu")).format == code, dtype
    strided = ab.from_dlpack(values[:, ::2])
    assert memoryview(strided).strides == (16, 8)  # a strided consumer gets the strides
    with pytest.raises(BufferError, match="strided, and the consumer asked for contiguous"):
        _buffer_of(strided, FORMAT | C_CONTIGUOUS)
    frozen = np.arange(3.0)
    frozen.flags.writeable = False
    read_only = ab.from_dlpack(frozen)
    assert memoryview(read_only).readonly
    with pytest.raises(BufferError, match="read-only"):
        _buffer_of(read_only, WRITABLE | FORMAT | ND)
    with pytest.raises(TypeError, match="must be read-write"):  # memoryview's BufferError, as the parser words it
        io.BytesIO(bytes(24)).readinto(memoryview(read_only))
    with pytest.raises(BufferError, match="only a tensor in host memory"):
        memoryview(ab.to_device(values, "opencl:0"))
    with pytest.raises(BufferError, match=r"no format for dtype bfloat16; take the tensor through DLPack"):
        memoryview(ab.to_device(values, "cpu", dtype="bfloat16"))  # was named "(4, 16, 1)"


class _Buffer(ctypes.Structure):
    """CPython's Py_buffer, to ask a Tensor for its memory with exactly the flags a consumer gives."""
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.py_object), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
                ("format", ctypes.c_char_p), ("shape", ctypes.POINTER(ctypes.c_ssize_t)),
                ("strides", ctypes.POINTER(ctypes.c_ssize_t)), ("suboffsets", ctypes.c_void_p),
                ("internal", ctypes.c_void_p)]


def _buffer_of(x, flags):
    """(ndim, shape or None, format or None, len) of x's buffer asked for with `flags`; raises as PyObject_GetBuffer does."""
    view = _Buffer()
    get = ctypes.pythonapi.PyObject_GetBuffer
    get.argtypes = [ctypes.py_object, ctypes.POINTER(_Buffer), ctypes.c_int]
    get(x, ctypes.byref(view), flags)
    try:
        shape = tuple(view.shape[i] for i in range(view.ndim)) if view.shape else None
        return view.ndim, shape, view.format and view.format.decode(), view.len
    finally:
        ctypes.pythonapi.PyBuffer_Release.argtypes = [ctypes.POINTER(_Buffer)]
        ctypes.pythonapi.PyBuffer_Release(ctypes.byref(view))


SIMPLE, WRITABLE, FORMAT, ND, C_CONTIGUOUS = 0, 1, 4, 8, 0x38  # CPython's PyBUF_* flags


def test_a_request_for_bare_bytes_is_refused_saying_what_to_use():
    # torch.asarray and torch.frombuffer ask for neither format nor shape, then read the
    # bytes flat as any dtype=: an int64 [[1, 2], [3, 4]] as float64 came back [4.9e-324, ...].
    values = np.array([[1, 2], [3, 4]], dtype=np.int64)
    tensor = ab.to_device(values, "cpu")
    for flags in (SIMPLE, WRITABLE):
        with pytest.raises(BufferError, match=r"a Tensor is an array of int64, not bytes.*torch.from_dlpack\(t\).*"
                                              r"memoryview\(t\)"):
            _buffer_of(tensor, flags)
    assert _buffer_of(tensor, ND) == (2, (2, 2), None, 32)  # typed by the consumer (mpi4py with a datatype)
    assert _buffer_of(tensor, FORMAT) == (1, None, np.dtype(np.int64).char, 32)
    with pytest.raises(BufferError, match="not bytes"):
        hashlib.sha256(tensor)
    with pytest.raises(BufferError, match=r"array of bfloat16, not bytes.*through DLPack.*torch.from_dlpack\(t\)"):
        hashlib.sha256(ab.to_device(values, "cpu", dtype="bfloat16"))  # memoryview(t) has no format for it either
    assert hashlib.sha256(memoryview(tensor)).digest() == hashlib.sha256(values.tobytes()).digest()  # bytes, asked so
    assert bytes(tensor) == values.tobytes()
    into = ab.to_device(np.zeros(4, dtype=np.int64), "cpu", copy=True)
    assert io.BytesIO(values.tobytes()).readinto(memoryview(into)) == 32  # a file read into a Tensor's memory
    assert np.asarray(into).tolist() == [1, 2, 3, 4]
    torch = pytest.importorskip("torch")
    for kwargs in ({}, {"dtype": torch.float64}):
        with pytest.raises(RuntimeError, match="could not retrieve"):  # torch puts its own words on our BufferError
            torch.asarray(tensor, **kwargs)
    assert torch.as_tensor(tensor, dtype=torch.float64).tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert torch.from_dlpack(tensor).tolist() == [[1, 2], [3, 4]]


def test_64_bit_integers_reach_numpy_as_its_int64_and_uint64():
    # Named "q"/"Q" they became NumPy's longlong, a dtype of its own: np.issubdtype(...,
    # np.int64) was False and torch.from_numpy refused the uint64 array.
    for dtype in (np.int64, np.uint64):
        values = np.array([2**40, 3], dtype=dtype)
        array = np.asarray(ab.to_device(values, "cpu", copy=True))
        assert array.dtype.type is dtype and np.issubdtype(array.dtype, dtype)
        np.testing.assert_array_equal(array, values)
    torch = pytest.importorskip("torch")
    unsigned = np.asarray(ab.to_device(np.array([2**63 + 1, 5], dtype=np.uint64), "cpu", copy=True))
    assert torch.from_numpy(unsigned).dtype == torch.uint64


def test_legacy_capsule_without_max_version_and_versioned_with_it():
    tensor = ab.from_dlpack(sample("int32"))
    assert _core.capsule_name(tensor.__dlpack__()) == "dltensor"
    assert _core.capsule_name(tensor.__dlpack__(max_version=(0, 8))) == "dltensor"
    versioned = tensor.__dlpack__(max_version=(1, 0))
    assert _core.capsule_name(versioned) == "dltensor_versioned"
    assert capsule_flags(versioned) == 0
    for capsule in (tensor.__dlpack__(), tensor.__dlpack__(max_version=(1, 5))):
        np.testing.assert_array_equal(np.from_dlpack(_Holder(capsule)), sample("int32"))


class _Holder:
    """A producer that hands over a capsule it already made (as old libraries did)."""

    def __init__(self, capsule, device=(1, 0)):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, stream=None):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


def test_read_only_versioned_export_and_a_legacy_copy_or_refusal():
    source = sample("uint16")
    source.flags.writeable = False
    tensor = ab.from_dlpack(source)
    assert capsule_flags(tensor.__dlpack__(max_version=(1, 0))) == READ_ONLY
    copied = np.from_dlpack(ab.from_dlpack(tensor.__dlpack__()))  # legacy: a copy of its own
    np.testing.assert_array_equal(copied, source)
    assert data_pointer(copied) != data_pointer(source)
    with pytest.raises(BufferError, match="read-only"):
        tensor.__dlpack__(copy=False)


def test_copy_true_sets_is_copied_and_copy_false_on_a_device_move_is_a_buffer_error():
    source = sample("float64")
    tensor = ab.from_dlpack(source)
    capsule = tensor.__dlpack__(max_version=(1, 0), copy=True)
    assert capsule_flags(capsule) == IS_COPIED
    copied = ab.from_dlpack(capsule)
    assert data_pointer(np.from_dlpack(copied)) != data_pointer(source)
    on_device = ab.to_device(source, "opencl:0", copy=True)
    with pytest.raises(BufferError, match="copy"):
        on_device.__dlpack__(max_version=(1, 0), dl_device=(ab.DLDeviceType.CPU, 0), copy=False)


def test_dl_device_asks_for_a_move_and_numpy_can_pull_from_opencl():
    source = sample("complex64")
    on_device = ab.to_device(source, "opencl:0", copy=True)
    np.testing.assert_array_equal(np.from_dlpack(on_device, device="cpu"), source)
    same = on_device.__dlpack__(max_version=(1, 0), dl_device=(4, 0), copy=False)
    assert capsule_flags(same) == 0


def test_streams_on_stream_less_devices():
    tensor = ab.from_dlpack(sample("int8"))
    tensor.__dlpack__(stream=None)
    tensor.__dlpack__(stream=-1)
    with pytest.raises(RuntimeError, match="stream=5"):  # ab.StreamError: NumPy's type (test_dlpack_numpy_peer)
        tensor.__dlpack__(stream=5, max_version=(1, 0))
    with pytest.raises(ValueError, match="stream"):
        ab.to_device(sample("int8"), "cpu", stream=1)
    # "a opencl:0 tensor" until the object-protocol hunt of 2026-11-30
    with pytest.raises(ab.DLPackError, match=r"^arraybridge: a tensor on opencl:0 was asked for with stream=-1"):
        ab.to_device(sample("int8"), "opencl:0").__dlpack__(stream=-1)


def test_raw_capsules_of_both_kinds_are_consumed_and_renamed():
    source = sample("int64")
    for capsule in (source.__dlpack__(), source.__dlpack__(max_version=(1, 0))):
        name = _core.capsule_name(capsule)
        tensor = ab.from_dlpack(capsule)
        assert _core.capsule_name(capsule) == "used_" + name
        assert data_pointer(np.from_dlpack(tensor)) == data_pointer(source)
        with pytest.raises(BufferError, match="already consumed"):
            ab.from_dlpack(capsule)


def test_a_capsule_with_another_name_is_refused():
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    name = ctypes.create_string_buffer(b"not_a_tensor")
    capsule = new(ctypes.addressof(name), name, None)
    with pytest.raises(BufferError, match="not_a_tensor"):
        ab.from_dlpack(capsule)


def test_old_producers_get_asked_again_without_keywords():
    class Old:  # DLPack before 1.0: no max_version keyword
        def __init__(self, array):
            self.array = array

        def __dlpack__(self, stream=None):
            return self.array.__dlpack__()

    source = sample("float16")
    tensor = ab.from_dlpack(Old(source))
    assert data_pointer(np.from_dlpack(tensor)) == data_pointer(source)


def test_objects_without_the_protocol_and_bad_returns():
    # A list is a structure of arrays: its first non-array is named by its place.
    with pytest.raises(TypeError, match=r"x\[0\] \(a int\) is neither a DLPack capsule nor an object with __dlpack__"):
        ab.to_device([1, 2, 3], "cpu")
    with pytest.raises(TypeError, match=r"dst \(a tuple\) is neither"):
        ab.copy(np.ones(2), (1, 2))

    class ReturnsInt:
        def __dlpack__(self, **kwargs):
            return 7

    with pytest.raises(TypeError, match="capsule"):
        ab.from_dlpack(ReturnsInt())


def test_device_strings():
    assert ab.to_device(sample("int8"), ("cpu")).device == "cpu"
    assert ab.to_device(sample("int8"), (ab.DLDeviceType.OPENCL, 0)).device == "opencl:0"
    assert ab.to_device(sample("int8"), ab.devices()[1]).device == ab.devices()[1].name
    for bad in ("gpu:0", "opencl:x", "cuda:-1", "opencl:0:1"):
        with pytest.raises(ValueError, match="device"):
            ab.to_device(sample("int8"), bad)
    for bad in (3.5, None, (99, 0), (1, -1)):
        with pytest.raises((TypeError, ValueError), match="device"):
            ab.to_device(sample("int8"), bad)
    with pytest.raises(ValueError, match="copy"):
        ab.to_device(sample("int8"), "cpu", copy="yes")
    with pytest.raises(ValueError, match="dtype"):
        ab.to_device(sample("int8"), "cpu", dtype="float128x")


def test_missing_devices_fail_clearly_and_the_source_is_released(refcount_of=None):
    import sys
    source = sample("float32")
    before = sys.getrefcount(source)
    with pytest.raises(ab.DeviceError, match="CUDA unavailable|cuda:99") as error:
        ab.to_device(source, "cuda:99")  # missing with or without a GPU
    assert error.value.status_name in ("ABR_ERR_NO_DEVICE", "ABR_ERR_BACKEND_UNAVAILABLE")
    with pytest.raises(ab.DeviceError, match="opencl:7"):
        ab.to_device(source, "opencl:7")
    del error
    assert sys.getrefcount(source) == before


def test_devices_backends_and_pool():
    names = [d.name for d in ab.devices()]
    assert names[0] == "cpu" and "opencl:0" in names
    cuda = [b for b in ab.backends() if b.name == "cuda"][0]
    if not cuda.available:
        assert "CUDA unavailable" in cuda.detail
    stats = ab.pool_stats()
    assert stats["limit_bytes"] > 0 and stats["bytes_in_use"] == 0
    assert ab.pool_trim() >= 0


def test_a_cuda_library_that_is_no_cuda_driver_is_called_so():
    """ARRAYBRIDGE_CUDA_LIBRARY=libm.so.6 said "has no cuInit (too old: ...)": a driver
    without cuInit is no driver at all (the process hunt)."""
    code = "import arraybridge as ab; print([b.detail for b in ab.backends() if b.name == 'cuda'][0])"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, ARRAYBRIDGE_CUDA_LIBRARY="libm.so.6"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "CUDA unavailable: libm.so.6 is no CUDA driver (it has no cuInit)", done.stdout


def _write_strides(capsule, strides):
    """Overwrites the strides of a legacy capsule's DLTensor: a hand-made export."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    tensor = get(capsule, b"dltensor")
    pointer = ctypes.c_void_p.from_address(tensor + 32).value  # DLTensor.strides
    values = (ctypes.c_int64 * len(strides)).from_address(pointer)
    for i, stride in enumerate(strides):
        values[i] = stride


def _cupy_bad_strides(array):
    """CuPy 13.4-14.2's element strides for `array`: its negative byte strides divided
    by the item size as unsigned 64-bit numbers (cupy/cupy#10172)."""
    return [((s + 2**64) % 2**64) // array.itemsize for s in array.strides]


def _fake_cupy_array(array, monkeypatch, version):
    """A producer that exports like CuPy `version` does: a capsule with the bad strides,
    and the signed byte strides in __cuda_array_interface__."""
    cupy = types.ModuleType("cupy")
    cupy.__version__ = version
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    capsule = array.__dlpack__()
    _write_strides(capsule, _cupy_bad_strides(array))

    class ndarray:
        __module__ = "cupy._core.core"
        __cuda_array_interface__ = {"shape": array.shape, "strides": array.strides, "typestr": array.dtype.str,
                                    "data": (array.ctypes.data, False), "version": 3}

        def __dlpack__(self, stream=None, max_version=None):
            return capsule

        def __dlpack_device__(self):
            return (1, 0)

    return ndarray()


def test_cupy_13_4_to_14_2_negative_strides_are_taken_from_its_cuda_array_interface(monkeypatch):
    array = np.arange(64, dtype=np.int32).reshape(8, 8)[::-1, ::-2]
    assert all(s > 2**61 for s in _cupy_bad_strides(array))  # what those versions export
    for version in ("13.4.0", "14.2.1"):
        producer = _fake_cupy_array(array, monkeypatch, version)
        np.testing.assert_array_equal(np.from_dlpack(ab.to_device(producer, "cpu", copy=True)), array)


def test_impossible_strides_from_any_other_producer_are_refused_saying_so(monkeypatch):
    array = np.arange(64, dtype=np.int32).reshape(8, 8)[::-1, ::-2]
    fixed_cupy = _fake_cupy_array(array, monkeypatch, "14.3.0")  # cupy/cupy#10228: exports right, so not repaired
    capsule = array.__dlpack__()
    _write_strides(capsule, _cupy_bad_strides(array))
    for producer in (fixed_cupy, _Holder(capsule)):
        with pytest.raises(ab.DLPackError, match=r"the producer's strides are invalid.*they read \[-32, -8\]"):
            ab.to_device(producer, "cpu", copy=True)


def test_a_0d_host_tensor_is_a_python_number_and_others_refuse_clearly():
    """The object-protocol hunt of 2026-11-30: int() and float() of a host Tensor read its
    bytes through the buffer protocol as text: a uint8 53 gave int 5, [49, 101, 51] gave
    float 1000.0, a float64 2.0 an error about a literal. As NumPy's 0-d arrays: a number."""
    import operator
    t = ab.to_device(np.array(53, np.uint8), "cpu")
    assert (int(t), float(t), complex(t), operator.index(t)) == (53, 53.0, 53 + 0j, 53)
    assert [10, 20, 30][ab.to_device(np.array(2), "cpu")] == 30
    assert int(ab.to_device(np.array(2.75), "cpu")) == 2 and float(ab.to_device(np.array(True), "cpu")) == 1.0
    for three in (ab.to_device(np.array([49, 101, 51], np.uint8), "cpu"), ab.to_device(np.array([7.0]), "cpu")):
        for convert in (int, float, complex, operator.index):
            with pytest.raises(TypeError, match="only a 0-d tensor converts"):
                convert(three)
    with pytest.raises(TypeError, match="only an integer tensor is an index"):
        operator.index(ab.to_device(np.array(2.0), "cpu"))
    on_device = ab.to_device(np.array(2.0), "opencl:0")
    for call, again in ((float, r"float\(t.to\('cpu'\)\)"), (operator.index, r"int\(t.to\('cpu'\)\)"),
                        (lambda x: f"{x:.1f}", r"format\(t.to\('cpu'\), spec\)")):
        with pytest.raises(TypeError, match=r"is read in host memory, and this tensor is on opencl:0: move it "
                                            rf"first, {again}"):  # it named np.asarray(t.to('cpu'))
            call(on_device)


def test_a_0d_host_tensor_formats_its_value_as_numpys_do():
    """The ecosystem hunt of 2026-12-01: f"{t:.3f}" raised "unsupported format string
    passed to arraybridge.Tensor.__format__", where NumPy's 0-d arrays give the value."""
    t = ab.to_device(np.array(3.14159, np.float32), "cpu")
    assert (f"{t:.3f}", format(t, ">8.2f"), f"{ab.to_device(np.array(7), 'cpu'):04d}") == ("3.142", "    3.14", "0007")
    assert f"{t}" == str(t) == repr(t)  # no spec: the Tensor's own words
    with pytest.raises(TypeError, match="only a 0-d tensor converts to a Python number to format"):
        f"{ab.to_device(np.arange(3.0), 'cpu'):.2f}"


def test_dl_device_that_is_no_pair_of_ints_is_a_type_error_saying_so():
    """It was int()'d item by item: "cpu" gave "invalid literal for int()", (1,) an
    IndexError, ("1", "0") and (1, 0, 7) were taken."""
    t = ab.to_device(np.arange(3.0), "cpu")
    for bad in ("cpu", (1,), ("1", "0"), (1, 0, 7), [1, 0], ab.devices()[0]):
        with pytest.raises(TypeError, match="dl_device is None or a .device type, device id. tuple"):
            t.__dlpack__(dl_device=bad, max_version=(1, 0))
    assert np.array_equal(np.from_dlpack(t, device="cpu"), np.arange(3.0))


def test_a_memory_conversion_error_survives_pickle_and_copy():
    """Pickled as cls(message), it could not be made again: a multiprocessing pool whose
    worker raised one hung for ever unpickling it."""
    import copy
    import pickle
    error = ab.MemoryConversionError("numpy", "torch", "the reason", "convert_memory")
    for again in (pickle.loads(pickle.dumps(error)), copy.copy(error), copy.deepcopy(error)):
        assert type(again) is ab.MemoryConversionError and str(again) == str(error)
        assert (again.source_type, again.target_type, again.reason, again.method) == \
            ("numpy", "torch", "the reason", "convert_memory")


@pytest.mark.parametrize("device", ["cpu", "opencl:0"])
def test_copy_and_deepcopy_of_a_tensor_copy_its_elements_on_its_device(device):
    """The object-protocol hunt of 2026-11-30: copy.copy(t) and copy.deepcopy of a state
    dict of Tensors raised "cannot pickle 'arraybridge.Tensor' object". Now, as NumPy's
    of an array, each is a copy of the elements on the same device, the caller's to
    write (a read-only source's too); one Tensor twice in a structure is one copy."""
    import copy
    source = np.arange(12.0).reshape(3, 4)[:, ::-2]
    t = ab.to_device(source, device)
    shallow = copy.copy(t)
    state = copy.deepcopy({"w": t, "again": [t]})
    for made in (shallow, state["w"]):
        assert made is not t and made.device == t.device and made.report.path != "zero_copy"
        assert not made.read_only
        np.testing.assert_array_equal(np.from_dlpack(made.to("cpu")), source)
    assert state["again"][0] is state["w"]
    ab.copy(np.zeros_like(source), shallow)  # the copy is written, the original is not
    np.testing.assert_array_equal(np.from_dlpack(t.to("cpu")), source)
    read_only = np.arange(3.0)
    read_only.flags.writeable = False
    viewed = ab.to_device(read_only, "cpu")
    assert viewed.read_only and not copy.copy(viewed).read_only


def _bytes_of(t):
    """A Tensor's elements as bytes, read in host memory whatever its dtype (NumPy has no bfloat16)."""
    host = t.to("cpu", copy=True, contiguous=True)
    return ctypes.string_at(host.data_ptr + host.byte_offset, host.nbytes)


@pytest.mark.parametrize("device", ["cpu", "opencl:0"])
def test_pickle_carries_a_tensor_by_value_made_again_on_its_device(device):
    """The ecosystem hunt of 2026-12-01: pickle.dumps(t) raised "cannot pickle
    'arraybridge.Tensor' object", where NumPy's arrays and torch's tensors pickle (a
    DataLoader's workers, multiprocessing, joblib, Ray's object store). Now its
    elements travel as a NumPy array and come back on the same device, exact, the
    receiver's own copy; bfloat16 and float8 as ml_dtypes' types."""
    import pickle
    grid = np.arange(24, dtype=np.float32).reshape(4, 6)
    sources = {"float32": grid, "strided": grid[::-1, ::2], "int64": np.array([2**40, -3]), "0-d": np.array(2.5),
               "empty": np.zeros((0, 3), np.int16), "bool": grid > 9, "complex64": (grid + 1j).astype(np.complex64)}
    frozen = np.arange(5.0)
    frozen.flags.writeable = False
    sources["read-only"] = frozen
    for name, source in sources.items():
        t = ab.to_device(source, device)
        for protocol in (2, pickle.HIGHEST_PROTOCOL):
            again = pickle.loads(pickle.dumps(t, protocol=protocol))
            assert (again.device, again.dtype, again.shape) == (t.device, t.dtype, t.shape), name
            assert not again.read_only and again.data_ptr != t.data_ptr, name
            np.testing.assert_array_equal(np.from_dlpack(again.to("cpu")), source, strict=True)
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for dtype in ("bfloat16", "float8_e4m3fn"):
        source = grid.astype(getattr(ml_dtypes, dtype))
        t = ab.to_device(source, device)
        again = pickle.loads(pickle.dumps(t))
        assert again.dtype == dtype and again.device == t.device and again.shape == t.shape
        assert _bytes_of(again) == source.tobytes(), dtype
    # Another process unpickles it (multiprocessing's way), its own device alike.
    code = ("import pickle, sys, numpy as np, arraybridge; t = pickle.loads(sys.stdin.buffer.read()); "
            "print(t.device, np.from_dlpack(t.to('cpu')).tolist())")
    done = subprocess.run([sys.executable, "-c", code], input=pickle.dumps(ab.to_device(grid[:2, :3], device)),
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().split(None, 1) == [device, f"{grid[:2, :3].tolist()}\n"]


def test_dl_device_naming_no_device_of_ours_is_a_buffer_error():
    """The consumers hunt of 2026-11-30: __dlpack__(dl_device=(1, 1)) raised ValueError,
    made by formatting "cpu:1" for the message, where the array API asks BufferError of
    a device the producer cannot export to (as (4, 7), opencl:7, already was)."""
    t = ab.to_device(np.arange(3.0), "cpu")
    for device in ((1, 1), (4, 7)):
        with pytest.raises(ab.DLPackError, match=r"__dlpack__\(.*\): "):
            t.__dlpack__(dl_device=device, max_version=(1, 0))
    with pytest.raises(ab.ArrayBridgeError, match=r"to_device\(1:3\): cpu is one memory kind, its only index is 0"):
        ab.to_device(np.ones(2), (1, 3))


def test_the_truth_of_a_0_d_tensor_is_its_value_and_of_any_other_ambiguous():
    """The OpenCL hunt of 2026-11-30: bool() of a 0-d Tensor holding 0 was True (int() of
    it 0), and of any Tensor True, where NumPy gives the value of one element or refuses."""
    for value in (0, 1, 0.0, -2.5, False, True, 0j):
        assert bool(ab.to_device(np.array(value), "cpu")) is bool(value)
    assert bool(ab.to_device(np.array([[0.0]]), "cpu")) is False and bool(ab.to_device(np.array([7]), "cpu"))
    for shape in ((3,), (0,), (2, 2)):
        with pytest.raises(ValueError, match=r"truth value of a tensor of shape .* is ambiguous"):
            bool(ab.to_device(np.ones(shape), "cpu"))
    with pytest.raises(TypeError, match=r"move it first, bool\(t.to\('cpu'\)\)"):  # it named np.asarray
        bool(ab.to_device(np.array([1.0]), "opencl:0"))
