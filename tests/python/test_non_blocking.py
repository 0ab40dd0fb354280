"""to_device and copy with non_blocking=True: the call returns once the work is
queued, the Tensor (or the copy's Event) says when it is done, and every reader
waits for it: NumPy and the buffer protocol on the host, a consumer's CUDA stream
on the device. On PoCL in process; on the fake CUDA driver, whose streams lag, a
read before the wait is shown to be wrong."""
import gc
import weakref

import numpy as np
import pytest

import arraybridge as ab
from test_cuda_fake import run_with_fake_cuda


def test_opencl_round_trip_queued_then_read_by_numpy():
    x = np.arange(1 << 18, dtype=np.float32).reshape(512, 512)
    t = ab.to_device(x, "opencl:0", copy=True, non_blocking=True)  # copy: never a wrap of x (aligned or not)
    assert t.device == "opencl:0" and t.report.path == "host_to_device"
    back = ab.to_device(t, "cpu", non_blocking=True)  # after t's work, on the same queue
    np.testing.assert_array_equal(np.from_dlpack(back), x)  # NumPy waits on the host
    assert back.is_ready() and t.is_ready()
    back.wait()  # once done, at once


def test_the_source_lives_until_its_queued_work_is_done():
    t = ab.to_device(np.arange(1 << 16, dtype=np.int64) * 3, "opencl:0", non_blocking=True)
    gc.collect()  # the temporary array's only owner is the queued write
    np.testing.assert_array_equal(np.from_dlpack(t.to("cpu")), np.arange(1 << 16, dtype=np.int64) * 3)


def test_a_cpu_only_transfer_is_done_when_it_returns():
    x = np.linspace(0, 1, 1000)
    t = ab.to_device(x, "cpu", copy=True, non_blocking=True)
    assert t.is_ready()
    np.testing.assert_array_equal(memoryview(t), x)  # the buffer protocol reads it too


def test_copy_non_blocking_returns_an_event_and_keeps_both_arrays():
    x = np.arange(4096, dtype=np.int32)
    device = ab.to_device(np.zeros_like(x), "opencl:0")
    done = ab.copy(x[::-1].copy(), device, non_blocking=True)  # the source's only owner is the Event
    assert done is None or isinstance(done, ab.Event)
    if done is not None:
        gc.collect()
        done.wait()
        assert done.is_ready() and repr(done) == "arraybridge.Event(done)"
    np.testing.assert_array_equal(np.from_dlpack(device.to("cpu")), x[::-1])

    into = np.zeros_like(x)
    done = ab.copy(device, into, non_blocking=True)
    if done is not None:
        done.wait()
    np.testing.assert_array_equal(into, x[::-1])
    with pytest.raises(TypeError):
        ab.Event()


def test_an_event_takes_a_weakref():
    """The object-protocol hunt of 2026-11-30: a caller keeping its pending work in a
    WeakSet could not (TypeError: cannot create weak reference)."""
    out = run_with_fake_cuda("""
        import gc, weakref, numpy as np, arraybridge as ab
        on_device = ab.to_device(np.zeros(1 << 16, np.float32), "cuda:0")
        done = ab.copy(np.ones(1 << 16, np.float32), on_device, non_blocking=True)
        assert isinstance(done, ab.Event), done
        pending = weakref.WeakSet([done])
        gone = weakref.ref(done)
        assert done in pending and gone() is done
        done.wait()
        del done
        gc.collect()
        assert gone() is None and len(pending) == 0
        print("ok")
    """, delay_us=20000)
    assert out.strip() == "ok", out


def test_structures_go_leaf_by_leaf_and_a_structure_copy_is_queued_as_one_batch():
    batch = {"a": np.arange(10.0), "b": [np.ones(3, dtype=np.int8)]}
    moved = ab.to_device(batch, "opencl:0", non_blocking=True)
    np.testing.assert_array_equal(np.from_dlpack(moved["a"].to("cpu")), batch["a"])
    np.testing.assert_array_equal(np.from_dlpack(moved["b"][0].to("cpu")), batch["b"][0])

    into = {"a": ab.to_device(np.zeros(10), "opencl:0"), "b": [ab.to_device(np.zeros(3, dtype=np.int8), "opencl:0")]}
    done = ab.copy({"a": np.arange(10.0) * 2, "b": [np.full(3, 7, dtype=np.int8)]}, into, non_blocking=True)
    assert done is None or isinstance(done, ab.Event)
    gc.collect()  # the sources' only owner is the Event
    if done is not None:
        done.wait()
    np.testing.assert_array_equal(np.from_dlpack(into["a"].to("cpu")), np.arange(10.0) * 2)
    np.testing.assert_array_equal(np.from_dlpack(into["b"][0].to("cpu")), np.full(3, 7, dtype=np.int8))
    # Host memory only: nothing to queue on, done when it returns.
    host = [np.zeros(4)]
    assert ab.copy([np.ones(4)], host, non_blocking=True) is None and (host[0] == 1).all()


def test_cuda_queued_work_is_waited_for_by_every_reader():
    out = run_with_fake_cuda("""
        import ctypes, gc, numpy as np, arraybridge as ab
        n = 1 << 16
        x = np.arange(n, dtype=np.int32)
        pinned = ab.to_device(x, "cuda_host")

        # The call returns with the DMA still queued: the host was not blocked.
        t = ab.to_device(ab.to_device(x, "cuda_host"), "cuda:0", non_blocking=True)
        assert not t.is_ready()
        gc.collect()  # the pinned source's only owner is the queued work
        host = ab.to_device(t, "cuda_host", non_blocking=True)  # ordered after t on the device
        assert not host.is_ready()
        early = np.ctypeslib.as_array((ctypes.c_int32 * n).from_address(host.data_ptr))
        assert not np.array_equal(early, x)  # read without the wait: the values are not there yet
        np.testing.assert_array_equal(np.from_dlpack(host), x)  # NumPy waits on the host
        assert host.is_ready() and np.array_equal(early, x)

        # A consumer's stream waits on the device: the host goes on.
        t = ab.to_device(pinned, "cuda:0", non_blocking=True)
        capsule = t.__dlpack__(stream=2, max_version=(1, 0))
        assert not t.is_ready()
        back = ab.to_device(capsule, "cpu", stream=2)  # read on stream 2: after t's copy only by the wait
        np.testing.assert_array_equal(np.from_dlpack(back), x)

        # copy queues too; its Event keeps both arrays.
        device = ab.to_device(np.zeros(n, dtype=np.int32), "cuda:0")
        done = ab.copy(ab.to_device(x[::-1].copy(), "cuda_host"), device, non_blocking=True)
        assert isinstance(done, ab.Event) and not done.is_ready()
        gc.collect()
        done.wait()
        np.testing.assert_array_equal(np.from_dlpack(device.to("cpu")), x[::-1])

        # A structure copy is one queued batch; its Event keeps every array.
        into = [ab.to_device(np.zeros(n, dtype=np.int32), "cuda:0") for _ in range(3)]
        done = ab.copy([ab.to_device(x + i, "cuda_host") for i in range(3)], into, non_blocking=True)
        assert isinstance(done, ab.Event) and not done.is_ready()
        gc.collect()  # the pinned sources' only owner is the Event
        done.wait()
        for i in range(3):
            np.testing.assert_array_equal(np.from_dlpack(into[i].to("cpu")), x + i)

        # A batch is queued at once too: every Tensor waits for the one event.
        parts = [ab.to_device(x[i:i + 1024], "cuda_host") for i in range(0, 4096, 1024)]
        batch = ab.to_device_many(parts, "cuda:0", non_blocking=True)
        assert not any(b.is_ready() for b in batch)
        np.testing.assert_array_equal(np.from_dlpack(batch[3].to("cpu")), x[3072:4096])
        assert all(b.is_ready() for b in batch)

        # A Tensor dropped while its work is queued waits for it before its memory goes.
        ab.to_device(t, "cuda_host", non_blocking=True)
        print("ok")
    """, delay_us=100000)
    assert out.strip() == "ok"


# A queued copy into (or out of) a Tensor, then a blocking call on it that names no
# stream: the blocking call ran on the runtime's own stream, unordered after the
# legacy stream's copy, and read stale or half-written values (found by a newcomer's
# trial on PoCL and on this fake, 2026-11-29). The Tensor now holds the copy's Event.
def test_a_blocking_call_after_a_queued_copy_into_or_out_of_a_tensor_sees_it():
    out = run_with_fake_cuda("""
        import gc, numpy as np, arraybridge as ab
        x = np.arange(1 << 16, dtype=np.float32)
        for reader in ("copy", "to_device", "structure"):
            device = ab.to_device(np.zeros_like(x), "cuda:0")
            done = ab.copy(x[::-1], device, non_blocking=True)  # a strided source: packed, then one DMA
            assert isinstance(done, ab.Event) and not done.is_ready()
            out = np.zeros_like(x)
            if reader == "copy":
                ab.copy(device, out)  # read after write
            elif reader == "to_device":
                out = np.from_dlpack(ab.to_device(device, "cpu"))
            else:
                ab.copy([device], [out])
            np.testing.assert_array_equal(out, x[::-1])
            # write after read: a queued read out of the Tensor, then a blocking write into it
            read = ab.to_device(device, "cuda_host", non_blocking=True)
            assert not read.is_ready()
            ab.copy(np.zeros_like(x), device)
            np.testing.assert_array_equal(np.from_dlpack(read), x[::-1])
        # a structure copied into Tensors, queued, then read
        into = [ab.to_device(np.zeros_like(x), "cuda:0") for _ in range(2)]
        done = ab.copy([x + 1, x + 2], into, non_blocking=True)
        assert isinstance(done, ab.Event) and not done.is_ready()
        for i, tensor in enumerate(into):
            np.testing.assert_array_equal(np.from_dlpack(tensor.to("cpu")), x + 1 + i)
        # Nothing left holding anything: a Tensor and its Event are no cycle.
        device = ab.to_device(np.zeros_like(x), "cuda:0")
        ab.copy(x, device, non_blocking=True)
        import weakref
        gone = weakref.ref(device)
        del device
        gc.collect()
        assert gone() is None
        del into, tensor, read, done
        print("ok")
    """, delay_us=100000, all_freed=True)
    assert out.strip() == "ok"


def test_a_view_of_a_tensor_is_ordered_with_the_queued_work_on_the_tensor_it_views():
    """The hunt of 2026-11-30: V = T.to(T.device) (or from_dlpack(T), or a batch's view)
    is T's memory, but carried none of T's queued work, nor T any of V's: a blocking
    read of V missed a queued write into T (10 of 10 runs), a blocking write into V
    overtook a queued read of T, and V.is_ready() said True while T's write was queued."""
    out = run_with_fake_cuda("""
        import numpy as np, arraybridge as ab
        x = np.arange(1 << 16, dtype=np.float32)
        makers = {"to": lambda t: t.to("cuda:0"), "from_dlpack": ab.from_dlpack,
                  "its capsule": lambda t: ab.from_dlpack(t.__dlpack__(max_version=(1, 0))),
                  "a batch of capsules": lambda t: ab.to_device([t.__dlpack__(max_version=(1, 0))], "cuda:0")[0],
                  "batch": lambda t: ab.to_device([t], "cuda:0")[0], "view of a view": lambda t: t.to("cuda:0").to("cuda:0")}
        for name, make_view in makers.items():
            t = ab.to_device(np.zeros_like(x), "cuda:0")
            v = make_view(t)
            assert v.report.path == "zero_copy", (name, v.report)
            done = ab.copy(x, t, non_blocking=True)  # queued write into T
            assert not v.is_ready() and not t.is_ready(), name
            np.testing.assert_array_equal(np.from_dlpack(v.to("cpu")), x)  # read after write, through V
            read = ab.to_device(t, "cuda_host", non_blocking=True)  # queued read of T ...
            ab.copy(np.zeros_like(x), v)  # ... then a blocking write into V
            np.testing.assert_array_equal(np.from_dlpack(read), x)
            done = ab.copy(x + 1, v, non_blocking=True)  # and the other way: a queued write into V
            np.testing.assert_array_equal(np.from_dlpack(t.to("cpu")), x + 1)
            v.wait()
            assert v.is_ready() and t.is_ready(), name
        # A host wrap of a page-locked Tensor on an OpenCL device: the same host bytes.
        t = ab.to_device(np.zeros_like(x), "cuda_host")
        w = t.to("opencl:0")
        assert w.report.path == "host_wrap", w.report
        done = ab.copy(ab.to_device(x, "cuda:0"), t, non_blocking=True)  # a queued DMA into t
        assert not w.is_ready()
        np.testing.assert_array_equal(np.from_dlpack(w.to("cpu")), x)
        del t, v, w, done, read
        print("ok")
    """, delay_us=100000, all_freed=True)
    assert out.strip() == "ok"


def test_a_queued_read_of_a_tensors_capsule_is_waited_for_by_a_write_into_the_tensor():
    """A capsule T exported is T's memory: a queued read of it (to_device, or a batch's)
    is a queued read of T, so a blocking write into T waits for it, as for a read of T
    itself. Before, only Tensor sources took the read's Event: the write overtook it."""
    out = run_with_fake_cuda("""
        import numpy as np, arraybridge as ab
        x = np.arange(1 << 16, dtype=np.float32)
        readers = {"to_device": lambda c: ab.to_device(c, "cpu", non_blocking=True),
                   "a batch": lambda c: ab.to_device([c], "cpu", non_blocking=True)[0],
                   "a structure": lambda c: ab.to_device({"w": c}, "cpu", non_blocking=True)["w"]}
        for name, read_queued in readers.items():
            t = ab.to_device(x, "cuda:0")
            read = read_queued(t.__dlpack__(max_version=(1, 0)))
            assert read.report.path != "zero_copy", (name, read.report)
            ab.copy(np.zeros_like(x), t)  # a blocking write into T, after the queued read
            np.testing.assert_array_equal(np.from_dlpack(read), x, err_msg=name)
            np.testing.assert_array_equal(np.from_dlpack(t.to("cpu")), 0, err_msg=name)
        # copy and copy_many: a capsule as the source (read), and as the destination (written)
        for name, copy in {"copy": ab.copy, "copy_many": lambda s, d, **k: ab.copy_many([s], [d], **k)}.items():
            t, into = ab.to_device(x, "cuda:0"), ab.to_device(np.zeros_like(x), "cuda:0")
            done = copy(t.__dlpack__(max_version=(1, 0)), into, non_blocking=True)
            ab.copy(np.zeros_like(x), t)  # waits for the queued read
            np.testing.assert_array_equal(np.from_dlpack(into.to("cpu")), x, err_msg=name)
            done = copy(ab.to_device(x + 1, "cuda:0"), t.__dlpack__(max_version=(1, 0)), non_blocking=True)
            t_ready = t.is_ready()  # asked first: T is ready only once the queued write into it is ...
            assert done is not None and (not t_ready or done.is_ready()), name
            np.testing.assert_array_equal(np.from_dlpack(t.to("cpu")), x + 1, err_msg=name)  # ... and a read waits
        del t, read, into, done
        print("ok")
    """, delay_us=100000, all_freed=True)
    assert out.strip() == "ok"


def test_queued_work_another_call_gives_a_tensor_meanwhile_is_not_forgotten():
    """The hunt of 2026-11-30 (threads): a call remembered T's queued work at import and,
    once its own work was queued, replaced T's Event with its own. Work another call
    queued on T in between (another thread, while this one had let go of the GIL: 1 run
    in 5; or, every time, a producer's __dlpack__ while the batch imported) was
    forgotten: T.is_ready() said True and a blocking read of T missed that write."""
    out = run_with_fake_cuda("""
        import ctypes, os, numpy as np, arraybridge as ab
        cu = ctypes.CDLL(os.environ["ARRAYBRIDGE_CUDA_LIBRARY"])
        context, stream = ctypes.c_void_p(), ctypes.c_void_p()
        assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(context), 0) == 0 and cu.cuCtxPushCurrent_v2(context) == 0
        assert cu.cuStreamCreate(ctypes.byref(stream), 0) == 0 and cu.cuCtxPopCurrent_v2(None) == 0
        x = np.arange(1, (1 << 16) + 1, dtype=np.int32)
        pinned = ab.to_device(x, "cuda_host")
        t = ab.to_device(np.zeros_like(x), "cuda:0")
        writes = []

        class Producer:  # its __dlpack__ queues a write into t while the batch imports
            def __init__(self, a):
                self.a = a

            def __dlpack_device__(self):
                return self.a.__dlpack_device__()

            def __dlpack__(self, **kwargs):
                writes.append(ab.copy(pinned, t, non_blocking=True))  # on the legacy stream
                return self.a.__dlpack__(**kwargs)

        other = ab.to_device(np.ones(4, np.int32), "cuda:0")
        scratch = ab.to_device(np.zeros_like(x), "cuda:0")
        assert cu.cuCtxPushCurrent_v2(context) == 0
        for _ in range(10):  # the legacy stream busy for ten copies: the write comes well after the batch's read
            assert cu.cuMemcpyHtoDAsync_v2(ctypes.c_uint64(scratch.data_ptr), ctypes.c_void_p(pinned.data_ptr),
                                           ctypes.c_size_t(x.nbytes), ctypes.c_void_p(1)) == 0
        assert cu.cuCtxPopCurrent_v2(None) == 0
        reads = ab.to_device_many([t, Producer(other)], "cuda_host", stream=stream.value, non_blocking=True)
        assert writes[0] is not None
        assert writes[0].is_ready() or not t.is_ready()  # t is ready only once the write into it is
        np.testing.assert_array_equal(np.from_dlpack(t.to("cpu")), x)  # a blocking read of t sees the write
        for r in reads:
            r.wait()
        print("ok")
    """, delay_us=20000)
    assert out.strip() == "ok"


def test_a_view_of_an_opencl_tensor_is_ordered_with_the_queued_work_on_it():
    """The same on PoCL's real queue: before, 20 of 20 reads of V at 64 MiB missed T's write."""
    x = np.arange(16 << 20, dtype=np.float32)
    for _ in range(2):
        t = ab.to_device(np.zeros_like(x), "opencl:0")
        v = t.to("opencl:0")
        assert v.report.path == "zero_copy", v.report
        ab.copy(x, t, non_blocking=True)
        np.testing.assert_array_equal(np.from_dlpack(v.to("cpu")), x)
        read = ab.to_device(t, "cpu", non_blocking=True)
        ab.copy(np.zeros_like(x), v)
        np.testing.assert_array_equal(np.from_dlpack(read), x)


def test_a_write_after_a_queued_batch_read_of_a_tensor_waits_for_the_read():
    """to_device_many(..., non_blocking=True) of Tensors, then a blocking write into one:
    the sources hold the batch's Event, as to_device's source does. Before, on PoCL,
    27 of 60 reads came back with the later write's zeros."""
    x = np.arange(1 << 20, dtype=np.float32)
    for _ in range(20):
        t = ab.to_device(x, "opencl:0", copy=True)
        reads = ab.to_device([t, t], "cpu", non_blocking=True)
        ab.copy(np.zeros_like(x), t)
        np.testing.assert_array_equal(np.from_dlpack(reads[0]), x)
        np.testing.assert_array_equal(np.from_dlpack(reads[1]), x)


# Queued work whose kernel faults once the call has returned (the fake's armed launch
# fault, as a sticky error on a GPU): every reader of its result raises the failure,
# and keeps raising it; nothing reads the unfilled memory as if it were done. The
# device is lost for the rest of the process, so each case runs in its own.
QUEUED_FAULT = """
import ctypes, os, numpy as np, pytest, arraybridge as ab
fake = ctypes.CDLL(os.environ["ARRAYBRIDGE_CUDA_LIBRARY"])
on_device = ab.to_device(np.arange(4096, dtype=np.int32), "cuda:0")
into = ab.to_device(np.zeros(4096, dtype=np.float64), "cuda:0")
fake.fake_cuda_control(b"fault_launch", 1)  # the next kernel launch faults when it runs
def every_reader_raises(t):
    for _ in range(2):  # and again: a failure is never forgotten
        for read in (t.wait, t.is_ready, lambda: t.__dlpack__(max_version=(1, 0)), lambda: np.from_dlpack(t),
                     lambda: ab.to_device(t, "cpu"), lambda: ab.copy(t, np.empty(4096)),
                     lambda: ab.to_device(t, "cuda:0", non_blocking=True)):
            with pytest.raises(ab.DeviceError, match="CUDA_ERROR_ILLEGAL_ADDRESS|lost"):
                read()
"""


@pytest.mark.parametrize("reader", ["is_ready", "wait"])
def test_a_queued_transfer_that_fails_never_reads_as_done(reader):
    out = run_with_fake_cuda(QUEUED_FAULT + f"""
t = ab.to_device(on_device, "cuda:0", dtype="float64", non_blocking=True)  # the cast is a kernel: it faults
asked = t.is_ready()
assert asked is False, asked  # queued, the lag not over
if "{reader}" == "is_ready":  # asked until it ends: the failure, never True
    import time
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            assert t.is_ready() is False
        except ab.DeviceError:
            break
        time.sleep(0.001)
    else:
        raise AssertionError("the failed work never ended")
every_reader_raises(t)
import gc, weakref
gone = weakref.ref(t)
del t
gc.collect()
assert gone() is None, "the Tensor of failed work outlived its last reference (a cycle through its failure)"
print("ok")
""", delay_us=20000, warnings_ok=True)
    assert out.strip() == "ok"


def test_a_queued_copy_that_fails_raises_from_its_event():
    out = run_with_fake_cuda(QUEUED_FAULT + """
done = ab.copy(on_device, into, non_blocking=True)  # int32 into float64 on the device: a kernel
assert isinstance(done, ab.Event) and done.is_ready() is False
for _ in range(2):
    with pytest.raises(ab.DeviceError, match="CUDA_ERROR_ILLEGAL_ADDRESS|lost"):
        done.wait()
    with pytest.raises(ab.DeviceError):
        done.is_ready()
print("ok")
""", delay_us=20000, warnings_ok=True)
    assert out.strip() == "ok"


def test_a_cuda_tensor_to_the_cpu_non_blocking_lands_in_page_locked_memory_queued():
    """As torch's .to("cpu", non_blocking=True): the result is the pool's page-locked
    memory, filled by a DMA the call only queues; NumPy waits for it on the host."""
    out = run_with_fake_cuda("""
        import ctypes, numpy as np, arraybridge as ab
        n = 1 << 20
        x = np.arange(n, dtype=np.int32)
        on_gpu = ab.to_device(x, "cuda:0")
        lent = ab.pool_stats()["bytes_in_use"]
        host = ab.to_device(on_gpu, "cpu", non_blocking=True)
        assert host.device == "cpu" and not host.is_ready()
        assert "page-locked" in host.report.detail, host.report.detail
        assert ab.pool_stats()["bytes_in_use"] >= lent + x.nbytes
        early = np.ctypeslib.as_array((ctypes.c_int32 * n).from_address(host.data_ptr))
        assert not np.array_equal(early, x)  # read without the wait: the values are not there yet
        np.testing.assert_array_equal(np.from_dlpack(host), x)  # NumPy waits on the host
        del early, host
        # Blocking, the result is plain host memory, done on return.
        done = ab.to_device(on_gpu, "cpu")
        assert done.is_ready() and "page-locked" not in done.report.detail
        np.testing.assert_array_equal(np.from_dlpack(done), x)
        print("ok")
    """, delay_us=100000)
    assert out.strip() == "ok"


def test_small_cuda_tensors_to_the_cpu_non_blocking_land_in_page_locked_memory_queued():
    """A batch of small reads does the same: one block of page-locked results, read
    into directly (runs of neighbours in one copy), the call queuing without a wait.
    Before, it synchronized the stream and copied each result out of a landing block."""
    out = run_with_fake_cuda("""
        import ctypes, numpy as np, arraybridge as ab
        arrays = [np.full(1000, i, dtype=np.int32) for i in range(200)]
        on_gpu = ab.to_device(arrays, "cuda:0")
        # The pool's block that staged those holds the same bytes in the same places, and
        # the results' block is that one again (the pool's one cached block of its size):
        # staging zeros through it first shows below that the results are not filled yet.
        zeros = ab.to_device([np.zeros(1000, dtype=np.int32)] * 200, "cuda:0")
        lent = ab.pool_stats()["bytes_in_use"]
        back = ab.to_device(on_gpu, "cpu", non_blocking=True)
        detail = back[0].report.detail
        assert "page-locked" in detail and "199 small read(s) joined" in detail, detail
        assert not back[0].is_ready()
        assert ab.pool_stats()["bytes_in_use"] >= lent + 200 * 4000
        early = np.ctypeslib.as_array((ctypes.c_int32 * 1000).from_address(back[-1].data_ptr))
        assert not np.array_equal(early, arrays[-1])  # read without the wait: not there yet
        for result, array in zip(back, arrays):
            np.testing.assert_array_equal(np.from_dlpack(result), array)  # NumPy waits on the host
        del early, back
        done = ab.to_device(on_gpu, "cpu")  # blocking: plain memory, done on return
        assert done[0].is_ready() and "page-locked" not in done[0].report.detail
        for result, array in zip(done, arrays):
            np.testing.assert_array_equal(np.from_dlpack(result), array)
        print("ok")
    """, delay_us=100000)
    assert out.strip() == "ok"


def test_a_batch_queued_at_once_shares_one_event():
    arrays = [np.full(1024, i, dtype=np.float32) for i in range(64)] + [np.arange(1 << 18, dtype=np.int16)]
    moved = ab.to_device_many(arrays, "opencl:0", non_blocking=True)
    back = ab.to_device_many(moved, "cpu", non_blocking=True)  # after the batch's work, on the same queue
    for result, array in zip(back, arrays):
        np.testing.assert_array_equal(np.from_dlpack(result), array)
    structure = ab.to_device({"a": arrays[:3], "b": arrays[-1]}, "opencl:0", non_blocking=True)
    np.testing.assert_array_equal(np.from_dlpack(structure["b"].to("cpu")), arrays[-1])


def test_a_source_goes_as_soon_as_its_queued_work_is_seen_done():
    # Not at the runtime's next transfer: waiting on the Tensor (or seeing it ready)
    # releases what the queued work kept, so the source's memory goes back then.
    out = run_with_fake_cuda("""
        import gc, weakref, numpy as np, arraybridge as ab
        x = np.arange(1 << 16, dtype=np.int32)
        for ask in ("wait", "is_ready"):
            src = ab.to_device(x, "cuda_host")
            kept = weakref.ref(src)
            t = ab.to_device(src, "cuda:0", non_blocking=True)
            del src
            gc.collect()
            assert kept() is not None, ask  # the queued copy still reads it
            if ask == "wait":
                t.wait()
            else:
                while not t.is_ready():
                    pass
            gc.collect()
            assert kept() is None, ask
            np.testing.assert_array_equal(np.from_dlpack(t.to("cpu")), x)
        print("ok")
    """, delay_us=50000)
    assert out.strip() == "ok"


def test_on_the_runtimes_own_opencl_queue_a_source_goes_once_its_work_is_waited_for():
    # The queue is kept for later work: what it kept for this transfer is handed to
    # the runtime when the event is recorded, so the wait releases it.
    n = 1 << 22  # 16 MiB: a write PoCL queues rather than runs at once
    src = ab.to_device(np.arange(n, dtype=np.float32), "cpu", copy=True)
    kept = weakref.ref(src)
    t = ab.to_device(src, "opencl:0", copy=True, non_blocking=True)
    del src
    t.wait()
    gc.collect()
    assert kept() is None
    np.testing.assert_array_equal(np.from_dlpack(t.to("cpu")), np.arange(n, dtype=np.float32))


def test_host_memory_still_being_filled_is_waited_for_on_the_host_before_the_host_reads_it():
    # A queued D2H into page-locked memory, then that Tensor moved on with
    # non_blocking: a device-side wait would order the device's reads only, while the
    # host engine converts (a cast) or packs (a batch's block) on the host at once.
    out = run_with_fake_cuda("""
        import numpy as np, arraybridge as ab
        n = 1 << 16
        x = np.arange(n, dtype=np.int32)
        on_device = ab.to_device(x, "cuda:0")
        for move in ("cast", "batch"):
            host = ab.to_device(on_device, "cuda_host", non_blocking=True)
            assert not host.is_ready()  # the lagging stream has not written it yet
            if move == "cast":
                moved = ab.to_device(host, "cuda:0", dtype="float64", non_blocking=True)
                np.testing.assert_array_equal(np.from_dlpack(moved.to("cpu")), x.astype(np.float64))
            else:
                moved = ab.to_device_many([host], "cuda:0", non_blocking=True)
                np.testing.assert_array_equal(np.from_dlpack(moved[0].to("cpu")), x)
        print("ok")
    """, delay_us=100000)
    assert out.strip() == "ok"
