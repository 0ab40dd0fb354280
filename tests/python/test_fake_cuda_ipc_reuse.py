"""The fake CUDA driver's IPC handles name a place in a shared region and the
allocation's generation (tests/cuda/fake_driver.cpp): a handle to memory its
exporter freed is refused (CUDA_ERROR_INVALID_HANDLE) while the exporter lives,
and so is one whose place a new allocation reuses, as the real driver refuses
them. Driven through the driver's entry points with ctypes; the importer is
another process."""
import ctypes
import os
import pathlib
import subprocess
import sys

import pytest

BUILD = pathlib.Path(os.environ.get("ARRAYBRIDGE_BUILD", pathlib.Path(__file__).resolve().parents[2] / "build"))
FAKE = BUILD / "fake-cuda" / "libcuda.so.1"
CUDA_ERROR_INVALID_HANDLE = 400

IMPORTER = r"""
import ctypes, sys
class Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]
cu = ctypes.CDLL(sys.argv[1])
context, pointer = ctypes.c_void_p(), ctypes.c_uint64()
assert cu.cuInit(0) == 0 and cu.cuDevicePrimaryCtxRetain(ctypes.byref(context), 0) == 0
assert cu.cuCtxPushCurrent_v2(context) == 0
status = cu.cuIpcOpenMemHandle_v2(ctypes.byref(pointer), Handle.from_buffer_copy(bytes.fromhex(sys.argv[2])), 1)
if status == 0:
    assert cu.cuIpcCloseMemHandle(pointer) == 0
print(status)
"""


def open_elsewhere(handle):
    done = subprocess.run([sys.executable, "-c", IMPORTER, str(FAKE), handle.hex()], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def test_a_freed_or_reused_allocation_is_refused_to_an_importer():
    if not FAKE.exists():
        pytest.skip(f"the fake CUDA driver is not built ({FAKE}): run make test")
    # Run in a child: the fake must not be this test process's libcuda (other tests load the real name).
    code = f"""
import ctypes, sys
sys.path.insert(0, {str(pathlib.Path(__file__).parent)!r})
from test_fake_cuda_ipc_reuse import open_elsewhere
cu = ctypes.CDLL({str(FAKE)!r})
context = ctypes.c_void_p()
assert cu.cuInit(0) == 0 and cu.cuDevicePrimaryCtxRetain(ctypes.byref(context), 0) == 0
assert cu.cuCtxPushCurrent_v2(context) == 0
def allocate():
    pointer = ctypes.c_uint64()
    assert cu.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(8192)) == 0
    return pointer
def handle_of(pointer):
    handle = (ctypes.c_char * 64)()
    assert cu.cuIpcGetMemHandle(handle, pointer) == 0
    return bytes(handle)
first = allocate()
old = handle_of(first)
assert open_elsewhere(old) == 0, "a live allocation opens"
assert cu.cuMemFree_v2(first) == 0
assert open_elsewhere(old) == {CUDA_ERROR_INVALID_HANDLE}, "freed: refused"
second = allocate()
assert second.value == first.value, "the fake reuses the place (first fit)"
assert open_elsewhere(old) == {CUDA_ERROR_INVALID_HANDLE}, "reused by another allocation: still refused"
assert open_elsewhere(handle_of(second)) == 0
assert cu.cuMemFree_v2(second) == 0
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
