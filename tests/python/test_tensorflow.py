"""TensorFlow (CPU) as a real peer, in fresh interpreters, in every import order.

TensorFlow carries its own LLVM, exported into the process's global scope, and PoCL
is built on LLVM: a PoCL loaded beside it crashes (TensorFlow first: SIGSEGV inside
clGetPlatformIDs) or fails its kernel builds (TensorFlow after: "unknown target CPU").
The runtime opens the OpenCL loader in a link-map namespace of its own when that LLVM
is already loaded, and in the shared namespace otherwise (opencl/loader.hpp), so each
order below works, with a kernel built on the device."""
import importlib.util
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow  # each starts TensorFlow in a fresh interpreter: 15-25 s on 2 cores

if importlib.util.find_spec("tensorflow") is None:
    pytest.skip("TensorFlow is installed by `make test`; run it through make", allow_module_level=True)

BUILD = pathlib.Path(os.environ.get("ARRAYBRIDGE_BUILD", pathlib.Path(__file__).resolve().parents[2] / "build"))

CONVERSIONS = textwrap.dedent("""
    import numpy as np
    import tensorflow as tf
    x = tf.reshape(tf.range(12, dtype=tf.float32), (3, 4))
    # TensorFlow -> us: zero-copy on the CPU, with the values intact.
    t = ab.to_device(x, "cpu")
    assert t.report.path == "zero_copy", t.report
    np.testing.assert_array_equal(np.from_dlpack(t), np.arange(12, dtype=np.float32).reshape(3, 4))
    back = ab.convert.convert_memory(x, "tensorflow", "numpy", gpu_id=None)
    np.testing.assert_array_equal(back, x.numpy())
    # us -> TensorFlow: a strided NumPy view arrives compact (TensorFlow takes nothing else), every dtype.
    for dtype in ["bool", "int8", "int32", "int64", "uint8", "uint16", "float16", "float32", "float64",
                  "complex64", "complex128"]:
        source = (np.arange(24).reshape(4, 6) % 3).astype(dtype)[::2, ::-1].T
        y = ab.convert.convert_memory(source, "numpy", "tensorflow", gpu_id=None)
        assert isinstance(y, tf.Tensor) and y.dtype.name == source.dtype.name, (y.dtype, dtype)
        np.testing.assert_array_equal(y.numpy(), source)
    # A view 4 bytes past an allocation: TensorFlow's first op on it aborted the process (IsAligned()).
    # Of bytes, which nobody may write: writable memory reaches TensorFlow as a copy of its own anyway.
    unaligned = np.frombuffer(np.arange(1025, dtype=np.float32).tobytes(), np.float32)[1:]
    y = ab.convert.convert_memory(unaligned, "numpy", "tensorflow", gpu_id=None)
    assert float(y[0]) == 1.0 and float(tf.reduce_sum(y)) == 524800.0, y
    try:
        ab.convert.convert_memory(unaligned, "numpy", "tensorflow", gpu_id=None, copy=False)
        raise AssertionError("copy=False handed TensorFlow unaligned data")
    except ab.convert.MemoryConversionError as error:
        assert "not 64-byte aligned" in str(error), error
    j = ab.convert.convert_memory(x, "tensorflow", "jax", gpu_id=None)
    np.testing.assert_array_equal(np.asarray(j), x.numpy())
    assert ab.convert.detect_memory_type(x) is ab.convert.MemoryType.TENSORFLOW
""")


def run(script, **env):
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **env)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                            env=environment)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


# OpenCL on PoCL with TensorFlow in the process: a cast kernel built and run on the
# device, a TensorFlow tensor there and back, and the loader where `where` says.
OPENCL = textwrap.dedent("""
    opencl = {b.name: b for b in ab.backends()}["opencl"]
    assert opencl.available and f"({where})" in opencl.detail, opencl.detail
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    o = ab.to_device(a.T, "opencl:0")
    cast = ab.to_device(o, "opencl:0", dtype="float64", copy=True)
    assert cast.report.path == "device_copy" and cast.report.cast, cast.report
    np.testing.assert_array_equal(np.from_dlpack(cast.to("cpu")), a.T.astype(np.float64))
    o = ab.to_device(x, "opencl:0")
    np.testing.assert_array_equal(np.from_dlpack(o.to("cpu")), x.numpy())
    print("ok")
""")


AWAY = "in a link-map namespace of its own, away from libtensorflow_framework.so.2's LLVM"


@pytest.mark.parametrize("order, where, namespace", [
    ("import tensorflow\nimport arraybridge as ab\n", AWAY, "auto"),  # TensorFlow first (crashed: SIGSEGV)
    ("import arraybridge as ab\nimport tensorflow\n", AWAY, "auto"),  # the runtime made at the first call, after it
    ("import arraybridge as ab\nab.devices()\nimport tensorflow\n", "in a link-map namespace of its own",
     "private"),  # the runtime made before it, in a namespace of its own as asked
], ids=["tensorflow-first", "arraybridge-imported-first", "runtime-made-first-private"])
def test_every_import_order_keeps_opencl(order, where, namespace):
    out = run(order + f"where = {where!r}\n" + CONVERSIONS + OPENCL, ARRAYBRIDGE_OPENCL_NAMESPACE=namespace)
    assert out.strip().endswith("ok")


def test_tensorflow_after_opencl_in_the_shared_namespace_is_named_in_the_build_error():
    """The default shares the namespace where no other LLVM is loaded yet (a namespace
    of its own overwrites other libraries' pthread keys, opencl/loader.hpp): TensorFlow
    loaded after that breaks PoCL's kernel builds, and the error says why and what to do."""
    out = run("import arraybridge as ab\nab.devices()\nimport tensorflow\n" + CONVERSIONS + textwrap.dedent("""
        a = np.arange(6, dtype=np.int32)
        np.testing.assert_array_equal(np.from_dlpack(ab.to_device(a, "opencl:0").to("cpu")), a)  # no kernel: works
        try:
            ab.to_device(ab.to_device(a, "opencl:0"), "opencl:0", dtype="float64", copy=True)
        except ab.ArrayBridgeError as error:
            print(error)
    """))
    assert ("(libtensorflow_framework.so.2's LLVM, loaded after OpenCL was opened in the shared namespace, breaks "
            "the driver's: load it before arraybridge first opens OpenCL, in a new process, or set "
            "ARRAYBRIDGE_OPENCL_NAMESPACE=private there)") in out, out


def test_the_shared_namespace_beside_tensorflow_is_refused_by_name():
    out = run("import tensorflow\nimport arraybridge as ab\n" + CONVERSIONS + textwrap.dedent("""
        opencl = {b.name: b for b in ab.backends()}["opencl"]
        assert not opencl.available, opencl.detail
        print(opencl.detail)
        try:
            ab.to_device(x, "opencl:0")
        except ab.ArrayBridgeError as error:
            print(error)
    """), ARRAYBRIDGE_OPENCL_NAMESPACE="global")
    assert ("OpenCL unavailable: not opened: libtensorflow_framework.so.2's LLVM would crash PoCL beside it in the "
            "shared namespace, which ARRAYBRIDGE_OPENCL_NAMESPACE=global asks for; unset it") in out, out
    assert "opencl:0" in out.splitlines()[-1], out


def test_tensorflow_first_with_opencl_left_out():
    out = run("import tensorflow\nimport arraybridge as ab\n" + CONVERSIONS + textwrap.dedent("""
        assert [d.name for d in ab.devices()] == ["cpu"]
        print("ok")
    """), ARRAYBRIDGE_DISABLE_OPENCL="1")
    assert out.strip().endswith("ok")


# pyclesperanto's own OpenCL is in the shared namespace: its PoCL must start before
# TensorFlow is loaded (after it, pyclesperanto crashes by itself, without us). Its
# arrays are then another copy of the driver's objects, matched to ours by device.
PYCLESPERANTO = textwrap.dedent("""
    import numpy as np
    src = np.arange(35, dtype=np.uint16).reshape(5, 7)
    array = cle.push(src)
    on_cpu = ab.to_device(array, "cpu")
    assert on_cpu.report.path == "device_to_host", on_cpu.report
    np.testing.assert_array_equal(np.from_dlpack(on_cpu), src)
    view = ab.to_device(array, "opencl:0")  # its buffer, in its context, from its copy of PoCL
    assert view.report.path == "zero_copy", view.report
    np.testing.assert_array_equal(np.from_dlpack(view.to("cpu")), src)
    cast = ab.to_device(view, "opencl:0", dtype="float32", copy=True)  # our kernel, built in its context
    np.testing.assert_array_equal(np.from_dlpack(cast.to("cpu")), src.astype(np.float32))
    given = ab.convert.convert_memory(src.T.astype(np.float32), "numpy", "pyclesperanto", gpu_id=0)
    np.testing.assert_array_equal(cle.pull(cle.add_image_and_scalar(given, scalar=1)), src.T + 1)
    target = cle.create((5, 7), dtype=np.float32)
    ab.copy(ab.to_device(src, "opencl:0"), target)  # from our context into its own
    np.testing.assert_array_equal(cle.pull(target), src.astype(np.float32))
    x = tf.constant(src)
    np.testing.assert_array_equal(cle.pull(ab.convert.convert_memory(x, "tensorflow", "pyclesperanto", gpu_id=0)), src)
    print("ok")
""")


@pytest.mark.parametrize("order", [
    "import pyclesperanto as cle\ncle.push(np.zeros(1, np.float32))\nimport tensorflow as tf\n"
    "import arraybridge as ab\n",
    "import arraybridge as ab\nab.devices()\nimport pyclesperanto as cle\ncle.push(np.zeros(1, np.float32))\n"
    "import tensorflow as tf\n",
], ids=["pyclesperanto-tensorflow-arraybridge", "arraybridge-pyclesperanto-tensorflow"])
def test_pyclesperanto_arrays_with_tensorflow_loaded(order):
    if importlib.util.find_spec("pyclesperanto") is None:
        pytest.skip("pyclesperanto is installed by `make test`; run it through make")
    # Our runtime made before TensorFlow builds its kernels in a namespace of its own only if asked.
    out = run("import numpy as np\n" + order + PYCLESPERANTO, ARRAYBRIDGE_OPENCL_NAMESPACE="private")
    assert out.strip().endswith("ok")


def test_cuda_beside_tensorflow_leaves_opencl_out_with_the_reason():
    """TensorFlow first, then the runtime with the (fake) CUDA driver: PoCL can neither
    share the namespace with TensorFlow's LLVM nor have one of its own beside the CUDA
    driver (whose pthread keys that namespace's libc would overwrite): OpenCL is left
    out with the reason, and CUDA works."""
    fake = BUILD / "fake-cuda" / "libcuda.so.1"
    if not fake.exists():
        pytest.skip(f"the fake CUDA driver is not built ({fake}): run make test")
    out = run("import tensorflow as tf\nimport arraybridge as ab\nimport numpy as np\n" + textwrap.dedent("""
        backends = {b.name: b for b in ab.backends()}
        assert backends["cuda"].available, backends["cuda"].detail
        print(backends["opencl"].available, backends["opencl"].detail)
        x = tf.reshape(tf.range(12, dtype=tf.float32), (3, 4))
        back = ab.to_device(ab.to_device(ab.to_device(x, "cuda:0"), "cuda:0", dtype="float64"), "cpu")
        np.testing.assert_array_equal(np.from_dlpack(back), x.numpy().astype(np.float64))
        print("ok")
    """), ARRAYBRIDGE_CUDA_LIBRARY=str(fake), FAKE_CUDA_DELAY_US="0")
    assert out.startswith("False OpenCL unavailable: not opened: libtensorflow_framework.so.2's LLVM would crash PoCL in "
                          "the shared namespace, and in a namespace of its own the drivers' libc would overwrite the "
                          "CUDA driver's pthread keys, which crashes it"), out
    assert out.strip().endswith("ok")


# pyclesperanto opens OpenCL as it is imported, and its PoCL binds the LLVM TensorFlow
# put in the global scope: with TensorFlow first, importing it dies (SIGSEGV). A
# conversion into pyclesperanto that would import it then is refused before, saying
# what to do; with pyclesperanto first, it converts exactly.
@pytest.mark.skipif(importlib.util.find_spec("pyclesperanto") is None,
                    reason="pyclesperanto is installed by `make test`; run it through make")
@pytest.mark.parametrize("first", ["tensorflow", "pyclesperanto"])
def test_tensorflow_into_pyclesperanto_in_either_import_order_never_crashes(first):
    out = run(textwrap.dedent(f"""
        import importlib, sys
        importlib.import_module("{first}")
        import numpy as np, tensorflow as tf, arraybridge as ab
        x = tf.reshape(tf.range(6, dtype=tf.int32), (2, 3))
        try:
            y = ab.convert.convert_memory(x, "tensorflow", "pyclesperanto", 0)
        except ab.MemoryConversionError as refused:
            assert "{first}" == "tensorflow", refused
            assert "would crash" in str(refused) and "before importing TensorFlow" in str(refused), refused
            assert "pyclesperanto" not in sys.modules  # refused before it was imported
            print("refused")
        else:
            import pyclesperanto as cle
            np.testing.assert_array_equal(cle.pull(y), x.numpy())
            print("converted")
    """))
    assert out.split() == (["refused"] if first == "tensorflow" else ["converted"])
