"""TensorFlow (CPU) as a real peer, in fresh interpreters.

TensorFlow carries its own LLVM, and so does PoCL: when TensorFlow is imported
first, PoCL crashes while the OpenCL ICD loader loads it (inside
clGetPlatformIDs). So these run in subprocesses: one creates the runtime before
importing TensorFlow, one imports TensorFlow first with ARRAYBRIDGE_DISABLE_OPENCL."""
import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest

if importlib.util.find_spec("tensorflow") is None:
    pytest.skip("TensorFlow is installed by `make test`; run it through make", allow_module_level=True)

CONVERSIONS = textwrap.dedent("""
    import numpy as np
    import tensorflow as tf
    x = tf.reshape(tf.range(12, dtype=tf.float32), (3, 4))
    # TensorFlow -> us: zero-copy on the CPU, with the values intact.
    t = ab.to_device(x, "cpu")
    assert t.report.path == "zero_copy", t.report
    np.testing.assert_array_equal(np.from_dlpack(t), np.arange(12, dtype=np.float32).reshape(3, 4))
    back = ab.convert_memory(x, "tensorflow", "numpy", gpu_id=None)
    np.testing.assert_array_equal(back, x.numpy())
    # us -> TensorFlow: a strided NumPy view arrives compact (TensorFlow takes nothing else), every dtype.
    for dtype in ["bool", "int8", "int32", "int64", "uint8", "uint16", "float16", "float32", "float64",
                  "complex64", "complex128"]:
        source = (np.arange(24).reshape(4, 6) % 3).astype(dtype)[::2, ::-1].T
        y = ab.convert_memory(source, "numpy", "tensorflow", gpu_id=None)
        assert isinstance(y, tf.Tensor) and y.dtype.name == source.dtype.name, (y.dtype, dtype)
        np.testing.assert_array_equal(y.numpy(), source)
    j = ab.convert_memory(x, "tensorflow", "jax", gpu_id=None)
    np.testing.assert_array_equal(np.asarray(j), x.numpy())
    assert ab.detect_memory_type(x) is ab.MemoryType.TENSORFLOW
""")


def run(script, **env):
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **env)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                            env=environment)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_tensorflow_after_the_runtime_with_opencl():
    out = run("import arraybridge as ab\nnames = [d.name for d in ab.devices()]\n" + CONVERSIONS + textwrap.dedent("""
        assert "opencl:0" in names
        o = ab.to_device(x, "opencl:0")
        np.testing.assert_array_equal(np.from_dlpack(o.to("cpu")), x.numpy())
        print("ok")
    """))
    assert out.strip().endswith("ok")


def test_tensorflow_first_with_opencl_left_out():
    out = run("import tensorflow\nimport arraybridge as ab\n" + CONVERSIONS + textwrap.dedent("""
        assert [d.name for d in ab.devices()] == ["cpu"]
        print("ok")
    """), ARRAYBRIDGE_DISABLE_OPENCL="1")
    assert out.strip().endswith("ok")
