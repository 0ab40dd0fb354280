"""Where the OpenCL loader is opened (opencl/loader.hpp: the shared namespace unless
another LLVM is already loaded, then a namespace of its own), each in a fresh interpreter: glibc's namespaces taken first (by dlmopen through
ctypes, until glibc refuses), another LLVM in the global scope (a stand-in library
that defines an LLVM symbol, loaded RTLD_GLOBAL as TensorFlow's is), and a value of
ARRAYBRIDGE_OPENCL_NAMESPACE it does not know. Never a crash: OpenCL works in the
shared namespace, or is left out with the reason."""
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

BUILD = pathlib.Path(os.environ.get("ARRAYBRIDGE_BUILD", pathlib.Path(__file__).resolve().parents[2] / "build"))
FAKE_LLVM = BUILD / "fake-llvm" / "libfake-llvm.so"

# Takes every namespace glibc will give (each new one loads libm and its own libc).
TAKE_NAMESPACES = textwrap.dedent("""
    import ctypes, os
    libc = ctypes.CDLL(None)
    libc.dlmopen.restype = ctypes.c_void_p
    libc.dlmopen.argtypes = [ctypes.c_long, ctypes.c_char_p, ctypes.c_int]
    taken = 0
    while libc.dlmopen(-1, b"libm.so.6", os.RTLD_NOW):  # LM_ID_NEWLM
        taken += 1
    assert taken >= 3, taken
""")

LOAD_FAKE_LLVM = "import ctypes, os\nctypes.CDLL({path!r}, mode=os.RTLD_GLOBAL)\n"

REPORT = textwrap.dedent("""
    import numpy as np, arraybridge as ab
    opencl = {b.name: b for b in ab.backends()}["opencl"]
    print(opencl.available, opencl.detail)
    a = np.arange(6, dtype=np.int32)
    np.testing.assert_array_equal(np.from_dlpack(ab.to_device(a[::-1], "cpu", copy=True)), a[::-1])  # host paths work
    if opencl.available:
        cast = ab.to_device(ab.to_device(a, "opencl:0"), "opencl:0", dtype="float32", copy=True)
        np.testing.assert_array_equal(np.from_dlpack(cast.to("cpu")), a.astype(np.float32))
        print("opencl ok")
    else:
        try:
            ab.to_device(a, "opencl:0")
        except ab.ArrayBridgeError as error:
            print("refused:", error)
""")


# Whether the CUDA driver is loaded in the process (by the runtime, or by anyone): the
# soname matches the fake driver too.
CUDA_LOADED = textwrap.dedent("""
    import ctypes as _ctypes, os as _os
    try:
        _ctypes.CDLL("libcuda.so.1", mode=_os.RTLD_NOLOAD | _os.RTLD_LAZY)
        print("cuda True")
    except OSError:
        print("cuda False")
""")
BESIDE_CUDA = "False OpenCL unavailable: not opened: "  # a namespace of its own would crash the CUDA driver


def run(script, **env):
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, **env))
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    return done.stdout


def fake_llvm():
    if not FAKE_LLVM.exists():
        pytest.skip(f"the stand-in LLVM is not built ({FAKE_LLVM}): run make test")
    return LOAD_FAKE_LLVM.format(path=str(FAKE_LLVM))


def test_opencl_opens_in_the_shared_namespace_by_default():
    out = run(REPORT)
    assert out.startswith("True libOpenCL.so.1 (in the shared namespace): "), out
    assert "opencl ok" in out


def test_with_no_namespace_left_opencl_still_opens_by_default():
    out = run(TAKE_NAMESPACES + REPORT)
    assert out.startswith("True libOpenCL.so.1 (in the shared namespace): "), out
    assert "opencl ok" in out


def test_with_no_namespace_left_and_another_llvm_opencl_is_left_out_with_the_way_out():
    out = run(TAKE_NAMESPACES + fake_llvm() + REPORT + CUDA_LOADED)
    if out.strip().endswith("cuda True"):  # refused before a namespace is asked for
        assert out.startswith(BESIDE_CUDA + "libfake-llvm.so's LLVM"), out
        return
    first = out.splitlines()[0]
    assert first.startswith("False OpenCL unavailable: no namespace of its own for libOpenCL.so.1 ("), out
    assert "and libfake-llvm.so's LLVM would crash PoCL in the shared one; try GLIBC_TUNABLES=" in first, out
    assert ("refused: to_device(opencl:0): destination: no device opencl:0: OpenCL unavailable: "
            "no namespace") in out, out


def test_another_llvm_gives_opencl_a_namespace_of_its_own():
    out = run(fake_llvm() + REPORT + CUDA_LOADED)
    if out.strip().endswith("cuda True"):
        assert out.startswith(BESIDE_CUDA + "libfake-llvm.so's LLVM would crash PoCL in the shared namespace, and in "
                              "a namespace of its own the drivers' libc would overwrite the CUDA driver's pthread "
                              "keys, which crashes it"), out
    else:
        assert out.startswith(
            "True libOpenCL.so.1 (in a link-map namespace of its own, away from libfake-llvm.so's LLVM): "), out
        assert "opencl ok" in out


@pytest.mark.parametrize("value, expected", [
    ("global", "True libOpenCL.so.1 (in the shared namespace: as ARRAYBRIDGE_OPENCL_NAMESPACE=global asks): "),
    ("private", "True libOpenCL.so.1 (in a link-map namespace of its own): "),
    ("nowhere", "False OpenCL unavailable: ARRAYBRIDGE_OPENCL_NAMESPACE=nowhere is not one of auto, private, global"),
])
def test_the_namespace_variable(value, expected):
    out = run(REPORT + CUDA_LOADED, ARRAYBRIDGE_OPENCL_NAMESPACE=value)
    if value == "private" and out.strip().endswith("cuda True"):
        expected = BESIDE_CUDA + "in a namespace of its own, which ARRAYBRIDGE_OPENCL_NAMESPACE=private asks for"
    assert out.startswith(expected), out


def test_private_asked_for_and_none_left_is_said():
    out = run(TAKE_NAMESPACES + REPORT + CUDA_LOADED, ARRAYBRIDGE_OPENCL_NAMESPACE="private")
    if out.strip().endswith("cuda True"):  # refused before a namespace is asked for
        assert out.startswith(BESIDE_CUDA + "in a namespace of its own"), out
        return
    assert out.startswith("False OpenCL unavailable: no namespace of its own for libOpenCL.so.1 ("), out
    assert "which ARRAYBRIDGE_OPENCL_NAMESPACE=private asks for; try GLIBC_TUNABLES=" in out, out
