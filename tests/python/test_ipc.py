"""CUDA IPC from Python: a Tensor's handle pickled to another process (multiprocessing,
spawn), opened there zero-copy; a handle made after a lagging stream names its result;
double imports share one mapping; an exporter that exited, a GPU the importer does not
see, host memory and OpenCL are refused by name. Against the fake CUDA driver, whose
device memory is shared memory behind the handles; on a GPU machine also with torch."""
import os
import pickle
import textwrap
import weakref

import numpy as np
import pytest

import arraybridge as ab

from conftest import requires_cuda
from test_cuda_fake import run_with_fake_cuda

# The parent's side of each check: this folder importable (for ipc_child) and a
# spawn context, as a process that holds CUDA state must use.
PARENT = """
import multiprocessing, os, pickle, sys
sys.path.insert(0, {folder!r})
import numpy as np, arraybridge as ab, ipc_child
spawn = multiprocessing.get_context("spawn")

def in_child(target, *args):
    results = spawn.Queue()
    child = spawn.Process(target=target, args=args + (results,))
    child.start()
    outcome = results.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0, child.exitcode
    assert not outcome[-1], "the fake CUDA driver found in the child: " + "; ".join(outcome[-1])
    return outcome
"""


def parent(code):
    return PARENT.format(folder=os.path.dirname(__file__)) + textwrap.dedent(code)


def test_a_tensor_is_opened_zero_copy_in_another_process_and_written_back():
    out = run_with_fake_cuda(parent("""
        values = np.arange(24, dtype=np.float32).reshape(4, 6)
        tensor = ab.to_device(values, "cuda:0")
        handle = pickle.loads(pickle.dumps(tensor.ipc_handle()))
        assert isinstance(handle, ab.IpcHandle) and len(bytes(handle)) > 0
        status, seen, facts, _ = in_child(ipc_child.open_and_write, handle, -values)
        assert status == "ok", (seen, facts)
        np.testing.assert_array_equal(seen, values)
        assert facts == {"device": "cuda:0", "path": "zero_copy", "one_mapping": True, "shape": (4, 6),
                         "dtype": "float32", "mappings_left": 0}, facts
        # The child wrote through its mapping: this process's tensor changed in place.
        np.testing.assert_array_equal(np.from_dlpack(tensor.to("cpu")), -values)
        # In the exporting process itself the handle gives a view of the same memory.
        here = ab.from_ipc(handle)
        assert here.data_ptr + here.byte_offset == tensor.data_ptr + tensor.byte_offset
        print("ok")
    """), delay_us=50)
    assert out.strip().endswith("ok")


def test_a_handle_after_a_lagging_stream_names_the_finished_values():
    """The exporter queues ten 20 ms copies on its own stream, the last one writing
    the values, and exports after them (stream=): the importer reads those. (In
    Python the export waits for that stream, as every call here returns finished;
    the importer's own wait for a lagging exporter is tests/cuda/test_ipc.cpp's.)"""
    out = run_with_fake_cuda(parent("""
        import ctypes
        cuda = ctypes.CDLL(os.environ["ARRAYBRIDGE_CUDA_LIBRARY"])
        context, stream = ctypes.c_void_p(), ctypes.c_void_p()
        assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), 0) == 0
        assert cuda.cuCtxPushCurrent_v2(context) == 0
        assert cuda.cuStreamCreate(ctypes.byref(stream), 1) == 0  # CU_STREAM_NON_BLOCKING
        fresh = np.arange(1 << 16, dtype=np.float32)
        tensor = ab.to_device(np.zeros_like(fresh), "cuda:0")
        source, scratch = ab.to_device(fresh, "cuda:0"), ab.to_device(fresh, "cuda:0")
        for target in [scratch] * 9 + [tensor]:
            assert cuda.cuMemcpyDtoDAsync_v2(ctypes.c_uint64(target.data_ptr), ctypes.c_uint64(source.data_ptr),
                                             ctypes.c_size_t(fresh.nbytes), stream) == 0
        handle = ab.ipc_handle(tensor, stream=stream.value)
        status, seen, facts, _ = in_child(ipc_child.open_and_write, handle, None)
        assert status == "ok", (seen, facts)
        assert np.array_equal(seen, fresh), "the handle was made before the exporter's stream finished"
        assert cuda.cuStreamSynchronize(stream) == 0
        print("ok")
    """), delay_us=20000)
    assert out.strip().endswith("ok")


def test_handles_name_their_gpu_and_an_importer_without_it_is_told():
    out = run_with_fake_cuda(parent("""
        tensor = ab.to_device(np.arange(8, dtype=np.int64), "cuda:1")
        handle = tensor.ipc_handle()
        status, seen, facts, _ = in_child(ipc_child.open_and_write, handle, None)
        assert status == "ok" and facts["device"] == "cuda:1", (seen, facts)
        os.environ["FAKE_CUDA_DEVICES"] = "1"  # the next child sees one GPU only
        status, name, message, _ = in_child(ipc_child.open_and_write, handle, None)
        del os.environ["FAKE_CUDA_DEVICES"]
        assert status == "error" and name == "DeviceError", (name, message)
        assert "on a GPU this process does not see (cuda:1 in process" in message, message
        print("ok")
    """))
    assert out.strip().endswith("ok")


def test_a_handle_whose_exporter_exited_is_refused_naming_why():
    out = run_with_fake_cuda(parent("""
        status, handle, _, _ = in_child(ipc_child.export_and_exit)
        try:
            ab.from_ipc(handle)
        except ab.InvalidArgumentError as error:
            assert "has exited" in str(error), error
        else:
            raise AssertionError("a handle of an exited process was opened")
        try:
            ab.from_ipc(b"not a handle")
        except ab.InvalidArgumentError as error:
            assert "not an IPC handle" in str(error), error
        print("ok")
    """))
    assert out.strip().endswith("ok")


def test_host_memory_and_opencl_have_no_ipc():
    with pytest.raises(ab.DLPackError, match="cpu is host memory"):
        ab.to_device(np.ones(4), "cpu").ipc_handle()
    with pytest.raises(ab.DLPackError, match="OpenCL has no interprocess memory handles"):
        ab.ipc_handle(ab.to_device(np.ones(4), "opencl:0"))
    with pytest.raises(TypeError, match="made from bytes"):
        ab.IpcHandle("text")


def test_what_is_no_handle_is_refused_by_type_and_a_handle_is_not_rewritten():
    """The object-protocol hunt of 2026-11-30: from_ipc(5) took bytes(5), five zero bytes,
    and went looking for a CUDA device to open them; a handle's bytes could be reassigned
    under its hash, so a set of handles lost it; and no weakref could name one."""
    for wrong in (5, "abc", None, [1, 2], 2.5):
        with pytest.raises(TypeError, match=f"from_ipc takes an IpcHandle or its bytes; got {type(wrong).__name__}$"):
            ab.from_ipc(wrong)
    handle = ab.IpcHandle(b"\x01" * 8)
    held = {handle}
    with pytest.raises(AttributeError):
        handle.data = b"\x02" * 8
    assert handle in held and handle.data == b"\x01" * 8 and bytes(handle) == handle.data
    assert weakref.ref(handle)() is handle
    assert pickle.loads(pickle.dumps(handle)) == handle


@requires_cuda
@pytest.mark.parametrize("framework", ["torch", "cupy"])
def test_a_framework_tensor_crosses_processes_on_a_gpu(framework):
    """On a real GPU: a torch or CuPy tensor's handle, opened by another process and
    handed to the same framework there through convert_memory, zero-copy (the child
    writes, we read)."""
    module = pytest.importorskip(framework)
    import multiprocessing
    import sys
    sys.path.insert(0, os.path.dirname(__file__))
    import ipc_child
    values = np.arange(4096, dtype=np.float32)
    x = module.from_numpy(values).cuda() if framework == "torch" else module.asarray(values)
    handle = ab.ipc_handle(x)
    spawn = multiprocessing.get_context("spawn")
    results = spawn.Queue()
    child = spawn.Process(target=ipc_child.open_in_framework, args=(handle, framework, results))
    child.start()
    status, seen, detail = results.get(timeout=120)
    child.join(timeout=120)
    assert status == "ok", detail
    np.testing.assert_array_equal(seen, values)
    back = x.cpu().numpy() if framework == "torch" else module.asnumpy(x)
    np.testing.assert_array_equal(back, values + 1)
