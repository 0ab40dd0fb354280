"""The DLPack C exchange API (DLPack 1.3), both ways: our Tensor's table called by a C
consumer (exchange_peer, tvm-ffi), and frameworks' tables taken by to_device,
from_dlpack and copy without their __dlpack__. Values, equal pointers, which path
was taken (call counts) and deleter counts."""
import logging
import os
import sys
import textwrap

import numpy as np
import pytest

import arraybridge as ab
from arraybridge import _core

from exchange import build_peer
from test_cuda_fake import run_with_fake_cuda


@pytest.fixture(scope="module")
def peer(tmp_path_factory):
    return build_peer(tmp_path_factory.mktemp("peer"))


def refuse_dlpack(*args, **kwargs):
    raise AssertionError("__dlpack__ was called: the exchange API should have been used")


def test_our_tensor_type_publishes_a_complete_table(peer):
    tensor = ab.to_device(np.arange(5, dtype=np.float32), "cpu")
    before = peer.counts()["deleted"]
    got = peer.consume(tensor)  # every function of our table, called from C
    assert (got["major"], got["minor"]) == (1, 3)
    assert got["data"] == got["view_data"] == tensor.data_ptr and got["numel"] == 5 and got["same_ndim"]
    assert got["stream"] == 0 and got["has_deleter"]  # nothing of ours is left pending on a stream
    made = got["made"]  # our allocator's tensor, handed back through our managed_tensor_to_py_object_no_sync
    assert isinstance(made, ab.Tensor) and made.shape == (5,) and made.dtype == "float32" and made.device == "cpu"
    assert np.array_equal(np.from_dlpack(made), np.zeros(5, np.float32))
    assert got["error"] is None and peer.counts()["deleted"] == before  # the peer's own deleters were not involved


def test_our_allocator_makes_tensors_on_other_devices_and_names_what_it_cannot(peer):
    tensor = ab.to_device(np.ones((2, 3), dtype=np.int16), "cpu")
    got = peer.consume(tensor, (int(ab.DLDeviceType.OPENCL), 0))
    assert got["made"].device == "opencl:0" and got["made"].shape == (2, 3) and got["made"].dtype == "int16"
    assert np.array_equal(np.from_dlpack(ab.to_device(got["made"], "cpu")), np.zeros((2, 3), np.int16))
    refused = peer.consume(tensor, (int(ab.DLDeviceType.OPENCL), 99))
    assert refused["made"] is None and refused["error"].startswith("ValueError: ") and "opencl:99" in refused["error"]


def test_our_side_of_a_handover_keeps_the_tensor_alive_until_the_consumer_lets_go(peer):
    source = np.arange(4, dtype=np.float64)
    tensor = ab.to_device(source, "cpu")
    references = sys.getrefcount(tensor)
    _core.handover_ns(tensor, 1000)  # the bench's C loop: 1000 owner views made and deleted
    assert sys.getrefcount(tensor) == references  # each view's reference was given back
    made = _core.hand_over(tensor, peer.Peer)  # the peer's tensor through its managed_tensor_to_py_object_no_sync
    assert made.data_ptr == tensor.data_ptr
    del tensor
    assert np.array_equal(np.from_dlpack(made), source)  # the view it holds keeps our tensor alive
    assert _core.hand_over(ab.to_device(source, "cpu"), np.ndarray) is None  # NumPy has no table


def test_a_framework_tensor_is_taken_through_its_table_not_dlpack(peer):
    source = np.arange(6, dtype=np.float32).reshape(2, 3)
    framework = peer.Peer(source)
    before = peer.counts()
    view = ab.to_device(framework, "cpu")
    after = peer.counts()
    assert after["from"] == before["from"] + 1 and view.data_ptr == framework.data_ptr
    assert after["stream"] == before["stream"]  # a CPU tensor: no stream to ask for
    assert view.report.path == "zero_copy" and np.array_equal(np.from_dlpack(view), source)
    del view
    assert peer.counts()["deleted"] == after["deleted"] + 1  # the peer's deleter ran once, when our view died
    copied = ab.to_device(framework, "cpu", copy=True)
    assert copied.data_ptr != framework.data_ptr and np.array_equal(np.from_dlpack(copied), source)
    assert peer.counts()["deleted"] == after["deleted"] + 2  # a copy lets go of the source at once
    on_device = ab.to_device(framework, "opencl:0")  # (PoCL wraps host memory: the source is then held)
    assert np.array_equal(np.from_dlpack(ab.to_device(on_device, "cpu")), source)
    target = np.zeros((2, 3), np.float32)
    ab.copy(framework, target)
    assert np.array_equal(target, source)
    assert peer.counts()["from"] == before["from"] + 4


def test_an_unknown_major_version_falls_back_to_dlpack_with_a_debug_line(peer, caplog):
    class Future(peer.Peer):  # DLPack 2 only: not usable here
        __dlpack_c_exchange_api__ = peer.api_capsule(2, False)

    class Chained(peer.Peer):  # DLPack 2 first, 1.3 behind it: the older table is taken
        __dlpack_c_exchange_api__ = peer.api_capsule(2, True)

    class NotACapsule(peer.Peer):
        __dlpack_c_exchange_api__ = 12345

    source = np.arange(3, dtype=np.int32)
    for cls, through_table in ((Future, False), (Chained, True), (NotACapsule, False)):
        framework = cls(source)
        before = peer.counts()["from"]
        with caplog.at_level(logging.DEBUG, logger="arraybridge"):
            caplog.clear()
            result = ab.from_dlpack(framework)
        assert np.array_equal(np.from_dlpack(result), source) and result.data_ptr == framework.data_ptr
        assert peer.counts()["from"] == before + through_table, cls.__name__
        logged = " ".join(r.getMessage() for r in caplog.records)
        assert ("using __dlpack__" in logged) == (not through_table), (cls.__name__, logged)


def test_tvm_ffi_takes_our_tensor_in_c_and_gives_its_own_back():
    tvm_ffi = pytest.importorskip("tvm_ffi")
    source = np.arange(12, dtype=np.float32).reshape(3, 4)
    tensor = ab.to_device(source, "cpu")
    original = ab.Tensor.__dlpack__
    ab.Tensor.__dlpack__ = refuse_dlpack  # tvm-ffi must use our table
    try:
        theirs = tvm_ffi.from_dlpack(tensor)
    finally:
        ab.Tensor.__dlpack__ = original
    assert tuple(theirs.shape) == (3, 4) and str(theirs.dtype) == "float32"
    del tensor
    assert np.array_equal(np.from_dlpack(theirs), source)  # their view keeps ours alive

    class Wrapper(tvm_ffi.core.DLTensorTestWrapper):  # tvm-ffi's table; its __dlpack__ refuses
        __dlpack__ = refuse_dlpack

    wrapped = Wrapper(theirs)
    ours = ab.to_device(wrapped, "cpu")  # through tvm-ffi's managed_tensor_from_py_object_no_sync
    assert np.array_equal(np.from_dlpack(ours), source) and ours.report.path == "zero_copy"
    back = _core.hand_over(ours, tvm_ffi.core.DLTensorTestWrapper)  # its managed_tensor_to_py_object_no_sync
    assert isinstance(back, tvm_ffi.Tensor) and np.array_equal(np.from_dlpack(back), source)


# A framework of the tests' own (exchange_peer) viewing a cuda:0 tensor, whose current
# stream lags: ten copies of 20 ms each (the fake's DMA delay), the last one writing
# `fresh` into the framework's memory. A reader that does not wait for that stream
# sees zeros, and the fake reports a stream-ordered race.
LAGGING_PRODUCER = """
import ctypes, os, sys
sys.path.insert(0, {folder!r})
import numpy as np, arraybridge as ab, exchange_peer as peer
cuda = ctypes.CDLL(os.environ["ARRAYBRIDGE_CUDA_LIBRARY"])
device = ab.to_device(np.zeros(1 << 16, np.float32), "cuda:0")
framework = peer.Peer(device)
context, stream = ctypes.c_void_p(), ctypes.c_void_p()
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), 0) == 0
assert cuda.cuCtxPushCurrent_v2(context) == 0
assert cuda.cuStreamCreate(ctypes.byref(stream), 1) == 0  # CU_STREAM_NON_BLOCKING
fresh = np.arange(1 << 16, dtype=np.float32)
fresh_on_device = ab.to_device(fresh, "cuda:0")
scratch = ab.to_device(fresh, "cuda:0")
for target in [scratch] * 9 + [framework]:
    assert cuda.cuMemcpyDtoDAsync_v2(ctypes.c_uint64(target.data_ptr), ctypes.c_uint64(fresh_on_device.data_ptr),
                                     ctypes.c_size_t(fresh.nbytes), stream) == 0
peer.set_work_stream(stream.value)
"""


def run_after_lagging_producer(peer, body):
    run_with_fake_cuda(LAGGING_PRODUCER.format(folder=os.path.dirname(peer.__file__)) + textwrap.dedent(body) +
                       "assert cuda.cuStreamSynchronize(stream) == 0\ndel framework, device, scratch, fresh_on_device\n",
                       delay_us=20000)


def test_a_cuda_copy_follows_the_producers_current_stream(peer):
    """With stream=None the copy must wait for the producer's current stream."""
    run_after_lagging_producer(peer, """
        back = ab.to_device(framework, "cpu")
        assert np.array_equal(np.from_dlpack(back), fresh), "the copy did not wait for the producer's stream"
        counts = peer.counts()
        assert counts["stream"] == 1 and counts["last_stream_device"] == (2, 0), counts
        del back
    """)


def test_a_cuda_view_waits_for_the_producers_current_stream(peer):
    """No data moves for a view, but the producer's pending write is still ahead of
    its readers: the view holds an event on the producer's stream, so a reader (here
    a copy to the CPU) waits for it, and a consumer's stream would (__dlpack__(stream=)).
    Found on an H100: a torch tensor filled on a side stream, viewed, then read on the
    default stream, was zeros (torch's __dlpack__ without a stream does not synchronize)."""
    run_after_lagging_producer(peer, """
        view = ab.to_device(framework, "cuda:0")
        assert view.report.path == "zero_copy" and view.data_ptr == framework.data_ptr
        assert not view.is_ready(), "the view holds no event for the producer's pending write"
        back = ab.to_device(view, "cpu")
        assert np.array_equal(np.from_dlpack(back), fresh), "the view's reader did not wait for the producer's stream"
        assert view.is_ready()
        del back, view
    """)


def test_a_copy_on_a_named_stream_waits_for_the_producers_stream_first(peer):
    """stream= names the stream a transfer follows; the producer's own pending write
    (on its current stream, which its exchange API named) comes first all the same:
    the copy on our own stream alone would be done after one of the producer's ten."""
    run_after_lagging_producer(peer, """
        ours = ctypes.c_void_p()
        assert cuda.cuStreamCreate(ctypes.byref(ours), 1) == 0
        copied = ab.to_device(framework, "cuda:0", copy=True, stream=ours.value)
        back = ab.to_device(copied, "cpu")
        assert np.array_equal(np.from_dlpack(back), fresh), "the copy on stream= did not wait for the producer's stream"
        assert cuda.cuStreamSynchronize(ours) == 0
        del back, copied
    """)


# ------------------------------------------------------------------ PyTorch (>= 2.10)

def torch_with_table():
    """torch when its Tensor type publishes a DLPack C exchange API, else a skip naming why."""
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (the GPU machine has it)")
    if not hasattr(torch.Tensor, "__dlpack_c_exchange_api__"):
        pytest.skip(f"torch {torch.__version__} has no __dlpack_c_exchange_api__ (PyTorch >= 2.10 has)")
    return torch


def test_torch_tensors_are_taken_through_torchs_table(monkeypatch):
    torch = torch_with_table()
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)[:, 1:]  # strided
    monkeypatch.setattr(torch.Tensor, "__dlpack__", refuse_dlpack)
    tensor = ab.from_dlpack(x)
    assert tensor.report.path == "zero_copy"
    assert tensor.data_ptr + tensor.byte_offset == x.data_ptr()
    copied = ab.to_device(x, "cpu", copy=True)
    monkeypatch.undo()
    np.testing.assert_array_equal(np.from_dlpack(tensor), x.numpy())
    np.testing.assert_array_equal(np.from_dlpack(copied), x.numpy())


def test_our_tensors_become_torch_tensors_through_torchs_table(monkeypatch):
    torch = torch_with_table()
    values = np.arange(6, dtype=np.int64).reshape(2, 3)
    tensor = ab.to_device(values, "cpu", copy=True)
    made = _core.hand_over(tensor, torch.Tensor)
    assert isinstance(made, torch.Tensor) and made.data_ptr() == tensor.data_ptr
    monkeypatch.setattr(torch, "from_dlpack", refuse_dlpack)  # convert_memory's fallback
    converted = ab.convert.convert_memory(values, "numpy", "torch", gpu_id=None)
    monkeypatch.undo()
    assert isinstance(converted, torch.Tensor) and converted.data_ptr() == values.ctypes.data
    del tensor  # torch's tensor keeps ours alive
    np.testing.assert_array_equal(made.numpy(), values)
    np.testing.assert_array_equal(converted.numpy(), values)
    # torch's own from_dlpack takes our tensor too (through our table or __dlpack__).
    again = torch.from_dlpack(ab.to_device(values, "cpu"))
    np.testing.assert_array_equal(again.numpy(), values)


def test_a_copy_out_of_torch_follows_torchs_current_cuda_stream():
    torch = torch_with_table()
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    x = torch.zeros(1 << 22, device="cuda")
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # about 0.1 s of spinning before the write
        x.fill_(7.0)
        back = ab.to_device(x, "cpu")  # stream=None: follows torch's current stream, `side`
    assert (np.from_dlpack(back) == 7.0).all(), "the copy did not wait for torch's current stream"
    torch.cuda.synchronize()


@pytest.mark.parametrize("problem, fields, said", [
    ("NULL data", dict(data=None), "data is NULL but the tensor has 12 elements"),
    ("a negative extent", dict(shape=(-3, 4)), r"shape\[0\] = -3 is negative"),
    ("an unknown device", dict(device=(99, 0)), "99"),
    ("an unknown dtype", dict(dtype=(77, 32, 1)), "77"),
    ("no bits", dict(dtype=(2, 0, 1)), "bits"),
    ("a newer DLPack", dict(version=(2, 0)), "version"),
])
def test_what_our_exchange_table_is_handed_is_checked_and_a_refusal_leaves_it_with_the_caller(problem, fields, said):
    """The consumers hunt of 2026-11-30: managed_tensor_to_py_object_no_sync checked only
    the major version, ndim and a shape, so a tensor with NULL data and 12 elements was
    held, and np.from_dlpack of it read garbage; a negative extent, device 99, dtype code
    77 and 0 bits were held too. Now each is refused as any import refuses it (a
    BufferError naming why), and the tensor stays the caller's: its deleter not called."""
    import ctypes
    import handmade_dlpack as hd
    values = np.arange(12, dtype=np.float32)
    made = dict(data=values.ctypes.data, ndim=2, shape=(3, 4), dtype=(2, 32, 1), version=(1, 3))
    made.update(fields)
    made["ndim"] = len(made["shape"])
    handmade = hd.Handmade(**made)
    pointer_of = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
        ("PyCapsule_GetPointer", ctypes.pythonapi))
    table = ctypes.cast(pointer_of(ab.Tensor.__dlpack_c_exchange_api__, hd.EXCHANGE_API),
                        ctypes.POINTER(hd.DLPackExchangeAPI)).contents
    to_py_object = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))(
        table.managed_tensor_to_py_object_no_sync)
    out = ctypes.c_void_p()
    with pytest.raises(BufferError, match=said):
        to_py_object(handmade.address, ctypes.byref(out))
    assert out.value is None and handmade.calls == 0
    handmade.delete()
    good = hd.Handmade(data=values.ctypes.data, ndim=2, shape=(3, 4), dtype=(2, 32, 1), version=(1, 3))
    assert to_py_object(good.address, ctypes.byref(out)) == 0
    tensor = ctypes.cast(out.value, ctypes.py_object).value
    ctypes.pythonapi.Py_DecRef.argtypes = [ctypes.py_object]
    ctypes.pythonapi.Py_DecRef(tensor)  # the new reference the table handed over
    np.testing.assert_array_equal(np.from_dlpack(tensor), values.reshape(3, 4))
    del tensor
    assert good.calls == 1
