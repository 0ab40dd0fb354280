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

jax = pytest.importorskip("jax", reason="JAX is installed by `make test`; run it through make")

WIDE = {"int64": [2**40, -1], "uint64": [2**63 + 5, 1], "float64": [1e300, 0.1], "complex128": [1e300 + 1j, 0.1j]}


@pytest.mark.parametrize("dtype", sorted(WIDE))
def test_jax_without_x64_refuses_what_it_would_narrow(dtype):
    assert not jax.config.jax_enable_x64  # JAX's default, and this suite's
    source = np.array(WIDE[dtype], dtype=dtype)
    with pytest.raises(ab.MemoryConversionError) as error:
        ab.convert_memory(source, "numpy", "jax", gpu_id=None)
    message = str(error.value)
    assert f"JAX keeps no {dtype} while jax_enable_x64 is off" in message
    assert "jax.config.update('jax_enable_x64', True)" in message and "dtype=" in message
    assert error.value.target_type == "jax"
    np.testing.assert_array_equal(source, np.array(WIDE[dtype], dtype=dtype))  # the source is untouched


def test_a_cast_asked_for_is_made_exactly():
    source = np.array([2**20, -7, 0], dtype=np.int64)
    result = ab.convert_memory(source, "numpy", "jax", gpu_id=None, dtype="int32")
    assert result.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(result), source)
    # Asking JAX for a dtype it cannot hold is refused the same way.
    with pytest.raises(ab.MemoryConversionError, match="JAX keeps no float64"):
        ab.convert_memory(source, "numpy", "jax", gpu_id=None, dtype="float64")
    # The narrow dtypes pass untouched, and other targets keep 64-bit data as it is.
    for dtype in ["int32", "float32", "complex64", "uint8", "bool"]:
        narrow = np.arange(5).astype(dtype)
        result = ab.convert_memory(narrow, "numpy", "jax", gpu_id=None)
        assert result.dtype == narrow.dtype
        np.testing.assert_array_equal(np.asarray(result), narrow)
    wide = np.array(WIDE["int64"], dtype=np.int64)
    np.testing.assert_array_equal(ab.convert_memory(wide, "numpy", "numpy", gpu_id=None), wide)


def test_jax_with_x64_on_gets_every_value():
    script = textwrap.dedent("""
        import jax
        jax.config.update("jax_enable_x64", True)
        import numpy as np, arraybridge as ab
        for dtype, values in %r.items():
            source = np.array(values, dtype=dtype)
            result = ab.convert_memory(source, "numpy", "jax", gpu_id=None)
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
        ab.convert_memory(source, "numpy", "pyclesperanto", gpu_id=0)
    array = ab.convert_memory(source, "numpy", "pyclesperanto", gpu_id=0, dtype="float32")
    np.testing.assert_array_equal(cle.pull(array), source.astype(np.float32))


@pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                    reason="TensorFlow is installed by `make test`; run it through make")
def test_tensorflow_sources_dlpack_cannot_carry_are_refused_and_variables_give_their_value():
    script = textwrap.dedent("""
        import tensorflow as tf
        import numpy as np, arraybridge as ab
        refused = []
        for data, reason in [(tf.constant(["a"]), "TensorFlow string tensors hold no numbers"),
                             (tf.ragged.constant([[1], [2, 3]]), "tf.RaggedTensor has no one dense buffer"),
                             (tf.sparse.from_dense(tf.eye(2)), "tf.SparseTensor has no one dense buffer")]:
            try:
                ab.convert_memory(data, "tensorflow", "numpy", gpu_id=None)
            except ab.MemoryConversionError as error:
                assert reason in str(error), str(error)
                refused.append(reason)
        assert len(refused) == 3, refused
        v = tf.Variable([1.0, 2.5])
        n = ab.convert_memory(v, "tensorflow", "numpy", gpu_id=None)
        np.testing.assert_array_equal(n, [1.0, 2.5])
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
