"""convert_memory never changes a value or a dtype without being asked: a target that
cannot hold the source's dtype is refused with the ways out, and dtype= asks for the
cast. TensorFlow sources that DLPack cannot carry are refused before TensorFlow's own
export (which aborts the process on strings); a variable converts through its value."""
import importlib.util
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import arraybridge as ab
from conftest import jax_x64

jax = pytest.importorskip("jax", reason="JAX is installed by `make test`; run it through make")

@pytest.fixture
def x64_off():
    """JAX's default."""
    with jax_x64(False):
        yield


WIDE = {"int64": [2**40, -1], "uint64": [2**63 + 5, 1], "float64": [1e300, 0.1], "complex128": [1e300 + 1j, 0.1j]}


@pytest.mark.parametrize("dtype", sorted(WIDE))
def test_jax_without_x64_refuses_what_it_would_narrow(dtype, x64_off):
    source = np.array(WIDE[dtype], dtype=dtype)
    with pytest.raises(ab.MemoryConversionError) as error:
        ab.convert.convert_memory(source, "numpy", "jax", gpu_id=None)
    message = str(error.value)
    assert f"JAX keeps no {dtype} while jax_enable_x64 is off" in message
    assert "jax.config.update('jax_enable_x64', True)" in message and "dtype=" in message
    assert error.value.target_type == "jax"
    np.testing.assert_array_equal(source, np.array(WIDE[dtype], dtype=dtype))  # the source is untouched


def test_a_cast_asked_for_is_made_exactly(x64_off):
    source = np.array([2**20, -7, 0], dtype=np.int64)
    result = ab.convert.convert_memory(source, "numpy", "jax", gpu_id=None, dtype="int32")
    assert result.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(result), source)
    # Asking JAX for a dtype it cannot hold is refused the same way.
    with pytest.raises(ab.MemoryConversionError, match="JAX keeps no float64"):
        ab.convert.convert_memory(source, "numpy", "jax", gpu_id=None, dtype="float64")
    # The narrow dtypes pass untouched, and other targets keep 64-bit data as it is.
    for dtype in ["int32", "float32", "complex64", "uint8", "bool"]:
        narrow = np.arange(5).astype(dtype)
        result = ab.convert.convert_memory(narrow, "numpy", "jax", gpu_id=None)
        assert result.dtype == narrow.dtype
        np.testing.assert_array_equal(np.asarray(result), narrow)
    wide = np.array(WIDE["int64"], dtype=np.int64)
    np.testing.assert_array_equal(ab.convert.convert_memory(wide, "numpy", "numpy", gpu_id=None), wide)


def test_jax_with_x64_on_gets_every_value():
    script = textwrap.dedent("""
        import jax
        jax.config.update("jax_enable_x64", True)
        import numpy as np, arraybridge as ab
        for dtype, values in %r.items():
            source = np.array(values, dtype=dtype)
            result = ab.convert.convert_memory(source, "numpy", "jax", gpu_id=None)
            assert result.dtype == source.dtype, (result.dtype, dtype)
            np.testing.assert_array_equal(np.asarray(result), source)
        print("ok")
    """ % WIDE)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_pyclesperanto_takes_a_cast_asked_for():
    if importlib.util.find_spec("pyclesperanto") is None:
        pytest.skip("pyclesperanto is installed by `make test`; run it through make")
    cle = importlib.import_module("pyclesperanto")
    source = np.array([[1.5, -2.25], [1e6, 0.0]], dtype=np.float64)
    with pytest.raises(ab.MemoryConversionError, match="no float64 arrays .* ask for a cast with dtype="):
        ab.convert.convert_memory(source, "numpy", "pyclesperanto", gpu_id=0)
    array = ab.convert.convert_memory(source, "numpy", "pyclesperanto", gpu_id=0, dtype="float32")
    np.testing.assert_array_equal(cle.pull(array), source.astype(np.float32))


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                    reason="TensorFlow is installed by `make test`; run it through make")
@pytest.mark.slow  # TensorFlow in a fresh interpreter
def test_tensorflow_sources_dlpack_cannot_carry_are_refused_and_variables_give_their_value():
    script = textwrap.dedent("""
        import tensorflow as tf
        import numpy as np, arraybridge as ab
        refused = []
        quantized = tf.quantization.quantize(tf.constant([1.0, 2.0]), 0.0, 3.0, tf.qint8).output
        for data, reason in [(tf.constant(["a"]), "TensorFlow string tensors hold no numbers"),
                             (tf.ragged.constant([[1], [2, 3]]), "tf.RaggedTensor has no one dense buffer"),
                             (tf.sparse.from_dense(tf.eye(2)), "tf.SparseTensor has no one dense buffer"),
                             (tf.IndexedSlices(tf.constant([[1.0]]), tf.constant([0])),
                              "tf.IndexedSlices has no one dense buffer for DLPack; pass tf.convert_to_tensor(x)"),
                             (quantized, "TensorFlow qint8 tensors are quantized integers")]:
            try:
                ab.convert.convert_memory(data, "tensorflow", "numpy", gpu_id=None)
            except ab.MemoryConversionError as error:
                assert reason in str(error), str(error)
                refused.append(reason)
            try:  # to_device too, as a DLPackError (TensorFlow's own InvalidArgumentError before)
                ab.to_device(data, "cpu")
                raise AssertionError(f"exported: {reason}")
            except ab.DLPackError as error:
                assert reason in str(error), str(error)
        assert len(refused) == 5, refused
        try:  # to_device too: vetted before TensorFlow's export is asked
            ab.to_device(tf.constant(["a", "b"]), "cpu")
            raise AssertionError("a string tensor was exported")
        except ab.DLPackError as error:
            assert isinstance(error, BufferError) and "string tensors hold no numbers" in str(error), str(error)
        np.testing.assert_array_equal(np.from_dlpack(ab.to_device(tf.Variable([3, 4]), "cpu")), [3, 4])
        v = tf.Variable([1.0, 2.5])
        n = ab.convert.convert_memory(v, "tensorflow", "numpy", gpu_id=None)
        np.testing.assert_array_equal(n, [1.0, 2.5])
        # What TensorFlow holds stays read-only here, and read-only NumPy data goes into it.
        t = tf.constant([1.0, 2.0])
        n = ab.convert.convert_memory(t, "tensorflow", "numpy", gpu_id=None)
        assert not n.flags.writeable
        try:
            ab.copy(np.ones(2, np.float32), t)
            raise AssertionError("a copy into a TensorFlow tensor was accepted")
        except ab.DLPackError as error:
            assert "JAX and TensorFlow arrays are immutable" in str(error), str(error)
        np.testing.assert_array_equal(t.numpy(), [1.0, 2.0])
        ro = np.arange(6.0).reshape(2, 3)[:, ::-1]
        ro.flags.writeable = False
        y = ab.convert.convert_memory(ro, "numpy", "tensorflow", gpu_id=None)
        np.testing.assert_array_equal(y.numpy(), ro)
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


# ---------------------------------------------------------------- read-only, both ways

def test_what_jax_holds_stays_read_only_here():
    jax = pytest.importorskip("jax")
    x = jax.device_put(np.arange(4.0), jax.devices("cpu")[0])  # JAX's own host memory, even beside a GPU
    n = ab.convert.convert_memory(x, "jax", "numpy", gpu_id=None)
    assert not n.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        n[0] = 99
    np.testing.assert_array_equal(np.asarray(x), [0.0, 1.0, 2.0, 3.0])
    view = ab.to_device(x, "cpu")
    assert view.read_only and view.report.path == "zero_copy"
    copied = ab.to_device(x, "cpu", copy=True)  # a copy is the caller's to write
    assert not copied.read_only
    target = jax.device_put(np.zeros(3, np.float32), jax.devices("cpu")[0])
    with pytest.raises(ab.DLPackError, match="marked READ_ONLY; JAX and TensorFlow arrays are immutable") as error:
        ab.copy(np.ones(3, np.float32), target)
    assert isinstance(error.value, BufferError) and error.value.status_name == "ABR_ERR_READ_ONLY"
    np.testing.assert_array_equal(np.asarray(target), [0.0, 0.0, 0.0])


def test_a_legacy_capsule_cannot_say_it_may_be_written_so_it_is_read_only():
    a = np.arange(3.0)
    assert ab.to_device(a.__dlpack__(), "cpu").read_only
    assert not ab.to_device(a.__dlpack__(max_version=(1, 0)), "cpu").read_only  # a versioned one says so
    with pytest.raises(ab.DLPackError, match="legacy DLPack capsule cannot say it may be written"):
        ab.copy(np.ones(3), a.__dlpack__())
    np.testing.assert_array_equal(a, [0.0, 1.0, 2.0])
    ab.copy(np.ones(3), a)  # NumPy's own array is writable, and says so
    np.testing.assert_array_equal(a, [1.0, 1.0, 1.0])


def test_a_read_only_source_goes_into_jax_without_asking_for_a_version():
    ro = np.arange(4.0, dtype=np.float32)
    ro.flags.writeable = False
    result = ab.convert.convert_memory(ro, "numpy", "jax", gpu_id=None)
    np.testing.assert_array_equal(np.asarray(result), ro)
    strided = np.arange(8, dtype=np.int32)[::2]
    strided.flags.writeable = False
    np.testing.assert_array_equal(np.asarray(ab.convert.convert_memory(strided, "numpy", "jax", gpu_id=None)), strided)


def test_a_dtype_torch_does_not_take_is_one_line():
    jnp = pytest.importorskip("jax.numpy")
    pytest.importorskip("torch")
    with pytest.raises(ab.MemoryConversionError) as error:
        ab.convert.convert_memory(jnp.zeros(4, jnp.float8_e3m4), "jax", "torch", gpu_id=None)
    message = str(error.value)
    assert "torch has no float8_e3m4 tensors" in message, message
    assert "\n" not in message and error.value.__cause__ is None and error.value.__suppress_context__
