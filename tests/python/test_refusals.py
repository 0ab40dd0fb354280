"""Bad input to convert_memory, detect_memory_type and to_device: one exception family,
with the argument's own name in the message; what NumPy accepts as a dtype is
accepted; nothing changes the data on the way to a refusal."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import arraybridge as ab


@pytest.mark.parametrize("source_type, target_type, reason", [
    ("mxnet", "numpy", "unknown source_type 'mxnet'; expected one of numpy, cupy, torch"),
    ("numpy", "paddle", "unknown target_type 'paddle'; expected one of numpy, cupy, torch"),
    ("numpy", 7, "unknown target_type 7"),
])
def test_unknown_type_names_are_conversion_errors(source_type, target_type, reason):
    with pytest.raises(ab.MemoryConversionError) as caught:
        ab.convert.convert_memory(np.ones(2), source_type, target_type, gpu_id=None)
    assert reason in caught.value.reason
    assert isinstance(caught.value, ab.ArrayBridgeError) and isinstance(caught.value, ValueError)
    assert (caught.value.source_type, caught.value.target_type) == (str(source_type), str(target_type))


@pytest.mark.parametrize("data", [{}, [[]], ()], ids=["dict", "nested-list", "tuple"])
def test_an_empty_structure_is_checked_as_an_array_would_be(data):
    """The hunt of 2026-11-30: with no array in it, a structure skipped every check, so
    convert_memory({}, "bogus", "nonsense") returned {}."""
    with pytest.raises(ab.MemoryConversionError, match="unknown source_type 'bogus'"):
        ab.convert.convert_memory(data, "bogus", "numpy", gpu_id=None)
    with pytest.raises(ab.MemoryConversionError, match="unknown target_type 'matlab'"):
        ab.convert.convert_memory(data, "numpy", "matlab", gpu_id=None)
    with pytest.raises(ab.MemoryConversionError, match="gpu_id must be None"):
        ab.convert.convert_memory(data, "numpy", "torch", gpu_id=-1)
    assert ab.convert.convert_memory(data, "numpy", "torch", gpu_id=None) == data


def test_a_structure_that_contains_itself_is_a_conversion_error():
    loop = {"w": np.ones(2)}
    loop["self"] = loop
    with pytest.raises(ab.MemoryConversionError, match="a structure that contains itself"):
        ab.convert.convert_memory(loop, "numpy", "numpy", gpu_id=None)


@pytest.mark.parametrize("gpu_id, reason", [
    (-1, "gpu_id must be None (CPU) or an int from 0 to 2147483647, not -1"),
    (10**30, "not 1000000000000000000000000000000"),
    (True, "not True"),
    (1.0, "not 1.0"),
    ("0", "not '0'"),
])
def test_bad_gpu_ids_are_named(gpu_id, reason):
    with pytest.raises(ab.MemoryConversionError, match="gpu_id") as caught:
        ab.convert.convert_memory(np.ones(2), "numpy", "jax", gpu_id=gpu_id)
    assert reason in caught.value.reason


def test_numpy_integers_are_gpu_ids_and_a_gpu_for_a_cpu_target_is_refused():
    source = np.arange(3, dtype=np.int32)
    out = ab.convert.convert_memory(source, "numpy", "numpy", gpu_id=np.int64(0))
    np.testing.assert_array_equal(out, source)
    with pytest.raises(ab.MemoryConversionError, match=r"numpy arrays live on the CPU; gpu_id=2 names a GPU"):
        ab.convert.convert_memory(source, "numpy", "numpy", gpu_id=np.uint8(2))
    np.testing.assert_array_equal(ab.convert.convert_memory(source, "numpy", "numpy", gpu_id=None), source)


def test_other_objects_of_a_framework_are_not_arrays():
    for thing in [np.dtype("f4"), np.float32, "text", [1, 2]]:
        with pytest.raises(ValueError, match="is not an array of numpy, cupy"):
            ab.convert.detect_memory_type(thing)
    with pytest.raises(ab.MemoryConversionError, match="not an array"):
        ab.convert.convert_memory(np.dtype("f4"), "numpy", "numpy", gpu_id=None)


def test_non_arrays_name_the_argument():
    with pytest.raises(TypeError, match=r"x \(a set\) is neither a DLPack capsule"):
        ab.to_device({1, 2}, "cpu")
    with pytest.raises(TypeError, match=r"x\[1\] \(a str\) is neither a DLPack capsule"):
        ab.to_device([np.ones(2), "abc"], "cpu")
    with pytest.raises(TypeError, match=r"src \(a str\) is neither"):
        ab.copy("abc", np.zeros(3))


@pytest.mark.parametrize("array, said", [
    (np.arange(4, dtype=">i4"), r"\(a numpy.ndarray of dtype >i4\) cannot go through DLPack: DLPack only supports native "
     r"byte order\.(; pass {role}.astype\({role}.dtype.newbyteorder\('='\)\) .*)?$"),
    (np.array(["2020-01-01"], dtype="datetime64[D]"), r"\(a numpy.ndarray of dtype datetime64\[D\]\) cannot go through"),
    (np.array([object()]), r"\(a numpy.ndarray of dtype object\) cannot go through DLPack"),
], ids=["big-endian", "datetime", "object"])
def test_what_a_producer_refuses_to_export_is_our_refusal_naming_the_argument(array, said):
    """The object-protocol hunt of 2026-11-30: a big-endian NumPy array raised NumPy's own
    BufferError, "DLPack only supports native byte order.", naming neither the argument
    nor what to do. Now it is a DLPackError (still a BufferError) naming the argument,
    its type and dtype, NumPy's own error kept as its cause; the same in a batch, a
    structure and as a copy's destination."""
    calls = {"x": lambda: ab.to_device(array, "cpu"), "x[1]": lambda: ab.to_device([np.ones(1), array], "cpu"),
             "x['w']": lambda: ab.to_device({"w": array}, "cpu"), "dst": lambda: ab.copy(np.ones(array.shape), array),
             "src": lambda: ab.copy(array, np.ones(array.shape))}
    for role, call in calls.items():
        with pytest.raises(ab.DLPackError, match=re.escape(f"arraybridge: {role} ") + said.format(role=re.escape(role))) \
                as caught:
            call()
        assert isinstance(caught.value, BufferError) and type(caught.value.__cause__) is BufferError
        # another array is the fix for a source; a destination is the caller's own: no hint to replace it
        assert ("astype" in str(caught.value)) == (role != "dst" and array.dtype.byteorder == ">"), caught.value


def test_a_producers_other_failures_are_kept_as_raised_and_its_buffer_errors_are_ours():
    """Only what says it cannot be exported (a BufferError, or an error about DLPack) is
    restated: a producer whose device failed, or that was interrupted, raises its own.
    (test_protocol asked every producer error to pass unchanged, a BufferError too.)"""
    class Failing:
        def __init__(self, error):
            self.error = error

        def __dlpack__(self, **kwargs):
            raise self.error

    for error in (RuntimeError("device lost"), OSError("no such file"), KeyboardInterrupt(), MemoryError()):
        with pytest.raises(type(error)) as caught:
            ab.to_device(Failing(error), "cpu")
        assert caught.value is error
    with pytest.raises(ab.DLPackError, match=r"arraybridge: x \(a [\w.<>]*Failing\) cannot go through DLPack: "
                                             r"no export today$") as caught:
        ab.to_device(Failing(BufferError("no export today")), "cpu")
    assert str(caught.value.__cause__) == "no export today"
    with pytest.raises(ab.DLPackError, match=r"cannot go through DLPack: ValueError's DLPack dtype is unknown"):
        ab.to_device(Failing(ValueError("ValueError's DLPack dtype is unknown")), "cpu")


@pytest.mark.parametrize("spelling", [float, "f8", "float64", np.float64, np.dtype("<f8"), "double"])
def test_what_numpy_accepts_as_a_dtype_is_accepted(spelling):
    source = np.arange(4, dtype=np.int16)
    out = np.from_dlpack(ab.to_device(source, "cpu", dtype=spelling))
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, source)
    moved = ab.convert.convert_memory(source, "numpy", "numpy", gpu_id=None, dtype=spelling)
    assert moved.dtype == np.float64


def test_a_dtype_neither_names_is_refused_naming_both():
    with pytest.raises(ValueError, match=r"unknown dtype 'real32'.*numpy.dtype\(\)"):
        ab.to_device(np.ones(2), "cpu", dtype="real32")
    with pytest.raises(ValueError, match="object"):
        ab.to_device(np.ones(2), "cpu", dtype=object)


def test_a_backend_left_out_by_the_environment_names_the_variable():
    import subprocess
    import sys
    script = ("import arraybridge as ab, numpy as np\n"
              "print({b.name: b for b in ab.backends()}['opencl'].detail)\n"
              "try:\n    ab.to_device(np.ones(2), 'opencl:0')\nexcept ab.DeviceError as error:\n    print(error)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          env=dict(__import__("os").environ, ARRAYBRIDGE_DISABLE_OPENCL="yes"))
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and len(lines) == 2, done.stdout + done.stderr
    said = "disabled by ARRAYBRIDGE_DISABLE_OPENCL=yes in the environment (unset it or set it to 0 to use it)"
    assert lines[0] == "OpenCL unavailable: " + said
    assert lines[1].endswith("no device opencl:0: OpenCL unavailable: " + said), lines[1]
    assert "ABR_RUNTIME_DISABLE_OPENCL" not in done.stdout


@pytest.mark.slow  # torch's fake-tensor machinery in a fresh interpreter: 9 s
def test_a_torch_tensor_without_storage_is_refused_saying_so():
    """The frameworks hunt of 2026-11-30: a wrapper subclass (a tensor of two tensors) or
    a FakeTensor exports elements with no data, and was refused as "source: data is NULL
    but the tensor has 4 elements". In its own process: making a wrapper subclass after
    TensorFlow's import aborts in LLVM (a torch and TensorFlow clash, ours or not)."""
    pytest.importorskip("torch")
    import subprocess
    import sys
    import textwrap
    code = textwrap.dedent("""
        import torch, arraybridge as ab
        from torch.testing._internal.two_tensor import TwoTensor
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode():
            fake = torch.empty(4)
        for x, name in ((TwoTensor(torch.arange(4.0), torch.arange(4.0)), "TwoTensor"), (fake, "FakeTensor")):
            try:
                ab.to_device(x, "cpu")
                raise SystemExit(f"a {name} was taken")
            except ab.DLPackError as error:
                assert f"is a {name} whose elements have no storage" in str(error), error
            try:
                ab.convert.convert_memory(x, "torch", "numpy", None)
                raise SystemExit(f"a {name} was converted")
            except ab.MemoryConversionError as error:
                assert "no storage" in str(error), error
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


def test_what_the_package_refuses_itself_has_its_class_status():
    """The object-protocol hunt of 2026-11-30: a refusal raised in Python (a masked array,
    a stream on a stream-less device, a producer's own refusal) had status and
    status_name None, so `error.status_name == "ABR_ERR_..."` missed it where the same
    class from the library matched."""
    masked = np.ma.masked_array(np.arange(3.0), mask=[0, 1, 0])
    stream_on_cpu = ab.to_device(np.ones(2), "cpu")
    cases = [(lambda: ab.to_device(masked, "cpu"), ab.DLPackError, "ABR_ERR_UNSUPPORTED"),
             (lambda: ab.to_device(np.arange(2, dtype=">f8"), "cpu"), ab.DLPackError, "ABR_ERR_UNSUPPORTED"),
             (lambda: stream_on_cpu.__dlpack__(stream=5, max_version=(1, 0)), ab.StreamError,
              "ABR_ERR_INVALID_ARGUMENT")]
    for call, cls, name in cases:
        with pytest.raises(cls) as caught:
            call()
        assert (caught.value.status_name, caught.value.status) == (name, getattr(ab._errors.lib, name)), caught.value
    from_library = ab.CopyRequiredError("said", -7, "ABR_ERR_SOMETHING")  # what the library said is kept
    assert (from_library.status, from_library.status_name) == (-7, "ABR_ERR_SOMETHING")
    assert ab.DeviceError("lost").status_name is None  # many statuses: none is assumed


def test_what_is_no_array_is_refused_with_nothing_on_stderr():
    """The Python versions check of 2026-12-01: on CPython 3.13 every such refusal also
    printed "Exception ignored in PyObject_HasAttr() ... AttributeError" on stderr (the
    attribute asked for with the AttributeError still set); tests/python/versions.sh runs
    this on 3.13."""
    code = ("import arraybridge as ab\ntry:\n    ab.to_device('abc', 'cpu')\nexcept TypeError as error:\n"
            "    print(error)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, ARRAYBRIDGE_DISABLE_OPENCL="1"))
    assert done.returncode == 0 and "x (a str) is neither a DLPack capsule" in done.stdout, done.stdout + done.stderr
    assert done.stderr == ""
