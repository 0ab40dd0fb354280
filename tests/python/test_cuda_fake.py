"""The Python package's CUDA paths against the fake driver (tests/cuda/fake_driver.cpp):
CUDA tensors made and read back, stream values, and the DLPack stream rules. The fake
is chosen when the runtime is created, so each check runs in a fresh interpreter."""
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

BUILD = pathlib.Path(os.environ.get("ARRAYBRIDGE_BUILD", pathlib.Path(__file__).resolve().parents[2] / "build"))
FAKE = BUILD / "fake-cuda" / "libcuda.so.1"


# Appended to every check: what the fake driver found wrong (stream-ordered races,
# frees without a context, failing pointer queries) fails it, as in the C tests.
NO_FINDINGS = r"""
import ctypes as _ctypes, os as _os, sys as _sys
_fake = _ctypes.CDLL(_os.environ["ARRAYBRIDGE_CUDA_LIBRARY"])
_fake.fake_cuda_stat.restype = _ctypes.c_longlong
_fake.fake_cuda_finding.restype = _ctypes.c_char_p
_found = [_fake.fake_cuda_finding(n).decode() for n in range(_fake.fake_cuda_stat(b"findings"))]
if _found:
    _sys.exit("the fake CUDA driver found:\n" + "\n".join(_found))
"""


def run_with_fake_cuda(code, delay_us=50, all_freed=False, warnings_ok=False):
    if not FAKE.exists():
        pytest.skip(f"the fake CUDA driver is not built ({FAKE}): run make test")
    env = dict(os.environ, ARRAYBRIDGE_CUDA_LIBRARY=str(FAKE), FAKE_CUDA_DELAY_US=str(delay_us))
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code) + NO_FINDINGS], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    if all_freed:  # no tensor alive at exit: the runtime gave back its idle blocks, the fake saw nothing left
        assert "fake libcuda at exit" not in done.stderr, done.stderr
    assert warnings_ok or "warning" not in done.stderr, done.stderr  # a lost device warns, as it must
    return done.stdout


def test_cuda_tensors_round_trip_with_streams():
    out = run_with_fake_cuda("""
        import numpy as np, arraybridge as ab
        names = [d.name for d in ab.devices()]
        assert "cuda:0" in names and "cuda_host" in names, names
        x = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2]
        for stream in (None, 1, 2, -1):
            t = ab.to_device(x, "cuda:0", stream=stream)
            assert t.device == "cuda:0" and t.shape == (4, 3), t
            assert t.report.path == "host_to_device" and t.report.packed, t.report
            back = ab.to_device(t, "cpu", stream=stream)
            assert back.report.path == "device_to_host", back.report  # under two chunks: one driver copy
            np.testing.assert_array_equal(np.from_dlpack(back), x)
        pinned = ab.to_device(x, "cuda_host")
        assert ab.to_device(pinned, "cpu").report.path == "zero_copy"
        assert ab.to_device(pinned, "cuda:0").report.path == "host_to_device"
        t = ab.to_device(x, "cuda:1", dtype="float64")
        assert ab.to_device(t, "cuda:0").report.path == "peer"
        np.testing.assert_array_equal(np.from_dlpack(ab.to_device(t, "opencl:0").to("cpu")), x)
        print("ok")
    """)
    assert out.strip() == "ok"


def test_cuda_stream_values_and_dlpack_stream_rules():
    out = run_with_fake_cuda("""
        import numpy as np, arraybridge as ab
        x = np.ones(8, dtype=np.int32)
        t = ab.to_device(x, "cuda:0")
        for bad in (0, -2):
            try:
                ab.to_device(x, "cuda:0", stream=bad)
            except ValueError as e:
                assert "stream=" in str(e), e
            else:
                raise AssertionError(f"stream={bad} accepted")
        try:
            t.__dlpack__(stream=0, max_version=(1, 0))
        except ab.StreamError as e:  # a RuntimeError: a wrong argument, not data that cannot be exported
            assert "0 is ambiguous" in str(e)
        else:
            raise AssertionError("__dlpack__(stream=0) accepted")
        for ok in (None, -1, 1, 2):
            assert type(t.__dlpack__(stream=ok, max_version=(1, 0))).__name__ == "PyCapsule"
        try:
            ab.to_device(x, "opencl:0", stream=1)
        except ValueError as e:
            assert "neither side" in str(e), e
        else:
            raise AssertionError("a stream for an OpenCL transfer was accepted")

        class CupyLikeNullStream:  # CuPy's null stream has ptr 0: the legacy default stream
            ptr = 0
        back = ab.to_device(t, "cpu", stream=CupyLikeNullStream())
        np.testing.assert_array_equal(np.from_dlpack(back), x)
        try:
            ab.to_device(t, "cpu", stream=3)  # not a stream the driver knows
        except ValueError as e:
            assert "not a CUDA stream" in str(e), e
        else:
            raise AssertionError("a junk stream handle was accepted")
        print("ok")
    """)
    assert out.strip() == "ok"


def test_eight_threads_after_a_large_staged_transfer_each_get_their_own_values():
    # The H100 scenario of issue 17: a large pageable round trip leaves pinned blocks
    # in the pool, then 8 threads convert a transposed 65x64 int64 array filled with
    # their own value. A block back in the pool while its DMA is queued hands one
    # thread's bytes to another; the fake's DMA lags the host to make that visible.
    out = run_with_fake_cuda(f"""
        import sys
        sys.path.insert(0, {str(pathlib.Path(__file__).parent)!r})
        from conftest import threads_convert_their_own_values
        threads_convert_their_own_values(24 << 20, rounds=6)  # 24 MiB: three staging chunks
        print("ok")
    """, delay_us=300, all_freed=True)
    assert out.strip() == "ok"


def test_set_staging_cuts_staged_transfers_as_asked_and_refuses_bad_values():
    out = run_with_fake_cuda("""
        import numpy as np, arraybridge as ab
        x = np.arange(3 * 2**18, dtype=np.float32)  # 3 MiB
        ab.set_staging(threads=np.int64(3), chunk_bytes=np.uint64(2**20))  # NumPy's integers too (the process hunt)
        t = ab.to_device(x, "cuda:0")
        assert t.report.path == "staged", t.report
        assert "in 1 MiB chunks" in t.report.detail and "3 copy threads" in t.report.detail, t.report.detail
        np.testing.assert_array_equal(np.from_dlpack(ab.to_device(t, "cpu")), x)
        try:
            ab.set_staging(chunk_bytes=1000)
        except ab.InvalidArgumentError as e:
            assert "staging" in str(e), e
        else:
            raise AssertionError("set_staging(chunk_bytes=1000) was accepted")
        for threads in (-1, 257, 2**40):
            try:
                ab.set_staging(threads=threads)
            except ValueError as e:
                assert str(e) == f"set_staging: threads must be from 0 to 256, not {threads}", e
            else:
                raise AssertionError(f"set_staging(threads={threads}) was accepted")
        ab.set_staging()  # back to the defaults: 3 MiB is under two 8 MiB chunks, one driver copy
        assert ab.to_device(x, "cuda:0").report.path == "host_to_device"
        print("ok")
    """)
    assert out.strip().endswith("ok"), out


def test_device_cache_reuses_a_deleted_tensors_memory_and_takes_a_limit():
    out = run_with_fake_cuda("""
        import time, numpy as np, arraybridge as ab
        x = np.arange(1024, dtype=np.float32)
        del_at = ab.to_device(x, "cuda:0").data_ptr
        def back():  # the reclaimer returns a deleted tensor's block after its barrier, on its own thread
            deadline = time.monotonic() + 5
            while ab.device_cache_stats()["bytes_cached"] < 4096 and time.monotonic() < deadline:
                time.sleep(0.001)
            return ab.device_cache_stats()
        before = back()
        t = ab.to_device(x + 1, "cuda:0")
        assert t.data_ptr == del_at  # the same block, holding the new values
        np.testing.assert_array_equal(np.from_dlpack(ab.to_device(t, "cpu")), x + 1)
        after = ab.device_cache_stats()
        assert after["hits"] == before["hits"] + 1 and after["bytes_in_use"] == 4096, (before, after)
        assert set(after) == set(ab.pool_stats())
        del t
        back()
        ab.set_device_cache_limit(1)  # below what is cached: freed at once
        assert ab.device_cache_stats()["bytes_cached"] == 0
        ab.set_device_cache_limit(0)
        assert ab.device_cache_stats()["limit_bytes"] == 1 << 30
        for bad in (-1, 1.5, True, "1"):
            try:
                ab.set_device_cache_limit(bad)
            except (TypeError, ValueError) as e:  # not an int; an int out of range
                assert type(e) is (ValueError if bad == -1 else TypeError), e
                assert str(e).startswith("set_device_cache_limit: limit_bytes must be"), e
            else:
                raise AssertionError(bad)
        print("ok")
    """, all_freed=True)
    assert out.strip() == "ok"


def test_copy_of_a_state_dict_into_cuda_tensors_streams_and_keeps_every_value():
    # Pageable arrays too large to coalesce, copied into existing device tensors (as
    # load_state_dict does): every DMA goes from or into the pool's pinned blocks,
    # none is the driver's own copy of pageable memory, each way and non-blocking.
    out = run_with_fake_cuda("""
        import ctypes, os
        import numpy as np, arraybridge as ab
        fake = ctypes.CDLL(os.environ["ARRAYBRIDGE_CUDA_LIBRARY"])
        fake.fake_cuda_stat.restype = ctypes.c_longlong
        pageable = lambda: fake.fake_cuda_stat(b"pageable_async_copies")
        ab.set_staging(chunk_bytes=2**20)
        rng = np.random.default_rng(7)
        state = {f"w{i}": rng.standard_normal(n).astype(dtype)
                 for i, (n, dtype) in enumerate([(300001, np.float32), (65537, np.float64), (700001, np.float16),
                                                 (262144, np.int64)])}
        on_device = {k: ab.to_device(np.zeros_like(v), "cuda:0") for k, v in state.items()}
        before = pageable()
        event = ab.copy(state, on_device, non_blocking=True)
        if event is not None:
            event.wait()
        assert pageable() == before, pageable() - before
        back = {k: np.full_like(v, 7) for k, v in state.items()}
        ab.copy(on_device, back)
        assert pageable() == before, pageable() - before
        for k in state:
            np.testing.assert_array_equal(back[k], state[k])
        print("ok")
    """, delay_us=2000)
    assert out.strip().endswith("ok"), out


def test_copy_keeps_the_order_of_a_pair_that_writes_another_pairs_source_through_a_reversed_view():
    # The first pair writes x through x[::-1] (negative strides: its memory starts
    # below its data pointer); the second reads x. Streamed ahead of the first, the
    # second would carry x's old values; it keeps its place, the other two stream.
    out = run_with_fake_cuda("""
        import numpy as np, arraybridge as ab
        ab.set_staging(chunk_bytes=2**20)
        n = 300001  # 1.2 MB of float32: two of them make two chunks
        x, y, z = (np.full(n, v, np.float32) for v in (1, 2, 3))
        on_device = np.arange(n, dtype=np.float32)
        d0 = ab.to_device(on_device, "cuda:0")
        d1, d2, d3 = (ab.to_device(np.zeros(n, np.float32), "cuda:0") for _ in range(3))
        ab.copy([d0, x, y, z], [x[::-1], d1, d2, d3])
        np.testing.assert_array_equal(x, on_device[::-1])
        np.testing.assert_array_equal(np.from_dlpack(ab.to_device(d1, "cpu")), on_device[::-1])
        np.testing.assert_array_equal(np.from_dlpack(ab.to_device(d2, "cpu")), y)
        np.testing.assert_array_equal(np.from_dlpack(ab.to_device(d3, "cpu")), z)
        print("ok")
    """, delay_us=2000)
    assert out.strip().endswith("ok"), out


def test_a_child_forked_while_the_fake_drivers_lock_was_held_exits():
    """The fake driver's at-exit report took its allocations' lock: a child forked
    while a parent's thread held it inherited it locked and hung at exit for ever
    (14 of 40 forks beside busy transfer threads; the process hunt of 11-30). The fake
    must fail as a GPU fails, never hang where a GPU would not."""
    out = run_with_fake_cuda("""
        import ctypes, os, sys, time, numpy as np, arraybridge as ab
        kept = ab.to_device(np.ones(4), "cuda:0")  # an allocation the parent's report would name
        fake = ctypes.CDLL(os.environ["ARRAYBRIDGE_CUDA_LIBRARY"])
        assert fake.fake_cuda_control(b"hold_memory_lock_ms", ctypes.c_longlong(1500)) == 0  # held on return
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # exit handlers run: the fake's at-exit report among them
        for _ in range(200):
            if os.waitpid(pid, os.WNOHANG)[0]:
                print("the child exited")
                break
            time.sleep(0.02)
        else:
            os.kill(pid, 9)
            print("the child hung at exit")
        del kept
    """)
    assert out.splitlines()[-1] == "the child exited", out


def test_a_cuda_tensor_pickles_by_value_and_comes_back_on_its_device():
    # Each Tensor is still being filled when it is pickled (the fake driver's copies take
    # 20 ms), and each holds values of its own, so a read before the fill shows.
    out = run_with_fake_cuda("""
        import pickle, numpy as np, arraybridge as ab
        rng = np.random.default_rng(7)
        for make in ("cuda:0", "cuda_host from cuda:0", "strided", "0-d"):
            source = rng.standard_normal((64, 48)).astype(np.float32)
            source = source[:, ::-3] if make == "strided" else np.array(source[5, 7]) if make == "0-d" else source
            t = ab.to_device(source, "cuda:0", non_blocking=True)
            if make == "cuda_host from cuda:0":
                t = ab.to_device(t, "cuda_host", non_blocking=True)
            assert not t.is_ready(), make
            again = pickle.loads(pickle.dumps(t))
            assert (again.device, again.dtype, again.shape) == (t.device, t.dtype, t.shape), again
            assert again.data_ptr != t.data_ptr
            np.testing.assert_array_equal(np.from_dlpack(again.to("cpu")), source, strict=True)
        print(pickle.dumps(ab.to_device(np.ones(3), "cuda:0")).hex())
    """, delay_us=20000)
    code = "import pickle, sys, arraybridge; pickle.loads(bytes.fromhex(sys.argv[1]))"
    done = subprocess.run([sys.executable, "-c", code, out.split()[-1]], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, ARRAYBRIDGE_DISABLE_CUDA="1"))  # a process without CUDA
    assert done.returncode == 1 and "DeviceError: arraybridge: a Tensor pickled on cuda:0 is unpickled in a process " \
        "without that device" in done.stderr, done.stderr
