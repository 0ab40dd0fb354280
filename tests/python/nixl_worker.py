"""One side of the NIXL tests (tests/python/test_nixl.py): `python nixl_worker.py send
SCENARIO` listens, prints "listening PORT" and sends the scenario's tensors to the first
peer that connects; `python nixl_worker.py recv SCENARIO PORT` connects to it and
receives them, checking every value. Each prints "<role> ok" when every check held (and
what it measured, as "figure NAME VALUE"); an AssertionError ends it with the reason."""
import json
import os
import sys
import time

import numpy as np

import arraybridge as ab
from arraybridge import nixl

DTYPES = (np.float32, np.float64, np.int32, np.int64, np.uint8, np.complex128)
BIG = 256 << 20  # bytes of the large transfer
ROUNDS = 1000  # sends of the registration count


def values(dtype, shape):
    """What the sender sends: distinct per element and per dtype, so a mix-up shows."""
    n = int(np.prod(shape))
    return (np.arange(n) % 251 + np.dtype(dtype).itemsize).astype(dtype).reshape(shape)


def host_dtypes(peer, other, role):
    """Six dtypes from NumPy, one from torch (any framework's tensor), and into out=."""
    for dtype in DTYPES:
        if role == "send":
            peer.send(values(dtype, (3, 5)), to=other).wait()
        else:
            got = peer.recv(other).wait()
            assert got.device == "cpu" and got.dtype == np.dtype(dtype).name, got
            np.testing.assert_array_equal(np.from_dlpack(got), values(dtype, (3, 5)))
    if role == "send":
        import torch
        peer.send(torch.arange(10, dtype=torch.int16), to=other).wait()
        peer.send(values(np.float64, (4, 4)), to=other).wait()
    else:
        got = np.from_dlpack(peer.recv(other).wait())
        assert got.dtype == np.int16 and (got == np.arange(10)).all(), got
        landing = np.full((4, 4), -1.0)
        assert peer.recv(other, out=landing).wait() is landing
        np.testing.assert_array_equal(landing, values(np.float64, (4, 4)))


def strided(peer, other, role):
    """Strided views are packed by the runtime on the way out and scattered on the way in,
    with the gaps of the landing array untouched; a cast on the way; an OpenCL tensor."""
    if role == "send":
        base = values(np.float64, (6, 8))
        peer.send(base[:, ::2], to=other).wait()  # a step of 2
        peer.send(base.T, to=other).wait()  # transposed
        peer.send(base[::-1, 1:7:3], to=other).wait()  # negative and uneven strides
        peer.send(values(np.int64, (5,)), to=other, dtype="float32").wait()  # cast while packing
        peer.send(np.array([1.75, -2.5, 3.0]), to=other, dtype="int32").wait()  # across kinds: asked for
        peer.send(np.array([1.5, 2.5]), to=other).wait()  # into an int64 out= with casting="unsafe"
        peer.send(ab.to_device(values(np.float32, (2, 3)), "opencl:0"), to=other).wait()
        return
    base = values(np.float64, (6, 8))
    landing = np.full((6, 8), -7.0)
    peer.recv(other, out=landing[:, 1::2]).wait()
    np.testing.assert_array_equal(landing[:, 1::2], base[:, ::2])
    assert (landing[:, ::2] == -7.0).all(), "the scatter wrote into the gaps"
    np.testing.assert_array_equal(np.from_dlpack(peer.recv(other).wait()), base.T)
    np.testing.assert_array_equal(np.from_dlpack(peer.recv(other).wait()), base[::-1, 1:7:3])
    cast = np.from_dlpack(peer.recv(other).wait())
    assert cast.dtype == np.float32 and (cast == np.arange(5) % 251 + 8).all(), cast
    truncated = np.from_dlpack(peer.recv(other).wait())
    assert truncated.dtype == np.int32 and truncated.tolist() == [1, -2, 3], truncated
    ints = np.zeros(2, np.int64)
    peer.recv(other, out=ints, casting="unsafe").wait()
    assert ints.tolist() == [1, 2], ints
    on_device = peer.recv(other, device="opencl:0").wait()
    assert on_device.device == "opencl:0", on_device
    np.testing.assert_array_equal(np.from_dlpack(on_device.to("cpu")), values(np.float32, (2, 3)))


def big(peer, other, role):
    """One transfer of 256 MiB, every byte checked."""
    pattern = np.resize(np.arange(251, dtype=np.uint8), BIG)  # a prime period: no page looks like another
    if role == "send":
        start = time.perf_counter()
        peer.send(pattern, to=other).wait()
        print(f"figure big_send_seconds {time.perf_counter() - start:.3f}", flush=True)
        return
    landing = np.zeros(BIG, np.uint8)
    start = time.perf_counter()
    peer.recv(other, out=landing).wait()
    print(f"figure big_seconds {time.perf_counter() - start:.3f}", flush=True)
    assert np.array_equal(landing, pattern), "the 256 MiB arrived changed"


def registrations(peer, other, role):
    """1000 sends of tensors of three sizes, each value checked: the registrations counted
    after the first round are all there ever are, on both sides, and the receiver makes
    one READ request per size, posted again for every later tensor of that size."""
    sizes = (1 << 10, 100 << 10, 1 << 20)
    after_first = None
    for i in range(ROUNDS):
        n = sizes[i % len(sizes)]
        if role == "send":
            handle = peer.send(np.full(n, i, np.int32), to=other)
            handle.wait()
        else:
            got = np.from_dlpack(peer.recv(other).wait())
            assert got.size == n and got[0] == i and got[-1] == i, (i, got[:2])
        if i == len(sizes) - 1:
            after_first = peer.stats()["registrations"]
    stats = peer.stats()
    print("figure stats " + json.dumps(stats), flush=True)
    assert after_first >= 1 and stats["registrations"] == after_first, (after_first, stats)
    assert stats["slots_in_use"] == 0, stats
    assert stats["sends" if role == "send" else "receives"] == ROUNDS, stats
    if role != "send":  # slots come back to the same addresses: each size's READ request is made once
        assert stats["reads_reused"] >= ROUNDS - 2 * len(sizes), stats


def sender_dies(peer, other, role):
    """The sender offers 64 MiB and exits at once: the receiver's wait ends with
    PeerLostError within seconds, not a hang."""
    if role == "send":
        peer.send(np.ones(64 << 20, np.uint8), to=other)
        os._exit(3)
    start = time.monotonic()
    try:
        peer.recv(other, timeout=20).wait(timeout=20)
        raise AssertionError("a transfer from a dead peer completed")
    except nixl.PeerLostError as error:
        print(f"figure lost_after {time.monotonic() - start:.3f} {error}", flush=True)
        assert time.monotonic() - start < 10, "noticing the death took too long"


def sender_dies_first(peer, other, role):
    """The sender offers 64 MiB (new memory: the offer carries its metadata) and exits;
    the receiver takes the offer only after that, when loading the metadata finds the
    sender gone: PeerLostError, not NIXL's own exception."""
    if role == "send":
        peer.send(np.ones(64 << 20, np.uint8), to=other)
        os._exit(3)
    time.sleep(2)
    try:
        peer.recv(other, timeout=20).wait(timeout=20)
        raise AssertionError("a transfer from a dead peer completed")
    except nixl.PeerLostError as error:
        print(f"figure lost {error}", flush=True)


def receiver_dies(peer, other, role):
    """The receiver takes the offer and exits before reading it: the sender's wait ends
    with PeerLostError within seconds."""
    if role == "recv":
        peer.recv(other)
        os._exit(3)
    start = time.monotonic()
    handle = peer.send(np.ones(1 << 20, np.uint8), to=other)
    try:
        handle.wait(timeout=20)
        raise AssertionError("a send to a dead peer completed")
    except nixl.PeerLostError as error:
        print(f"figure lost_after {time.monotonic() - start:.3f} {error}", flush=True)
        assert time.monotonic() - start < 10, "noticing the death took too long"
    assert peer.stats()["slots_in_use"] == 0, peer.stats()


def vram(peer, other, role):
    """CUDA tensors VRAM to VRAM (UCX's cuda_ipc between the processes), values checked."""
    import torch
    expected = torch.arange(1 << 20, dtype=torch.float32, device="cuda:0") * 3
    if role == "send":
        peer.send(expected, to=other).wait()
        peer.send(expected.view(1024, 1024)[:, ::2], to=other).wait()  # strided, packed on the GPU
    else:
        got = peer.recv(other, device="cuda:0").wait()
        assert got.device == "cuda:0", got
        assert torch.equal(torch.from_dlpack(got), expected), "VRAM values changed"
        landing = torch.zeros(1024, 512, device="cuda:0")
        peer.recv(other, out=landing).wait()
        assert torch.equal(landing, expected.view(1024, 1024)[:, ::2]), "strided VRAM values changed"
    arenas = peer.stats()["arenas"]
    assert "VRAM:0" in arenas and arenas["VRAM:0"]["registrations"] >= 1, arenas
    print("figure arenas " + json.dumps(arenas), flush=True)


SCENARIOS = {"host": host_dtypes, "strided": strided, "big": big, "registrations": registrations,
             "sender_dies": sender_dies,
             "sender_dies_first": sender_dies_first, "receiver_dies": receiver_dies, "vram": vram}

if __name__ == "__main__":
    role, scenario = sys.argv[1], sys.argv[2]
    nixl.skip_infiniband()  # UCX's InfiniBand module crashes the process at exit where no device is
    with nixl.Peer(f"{scenario}-{role}", listen=("127.0.0.1", 0), timeout=60) as peer:
        if role == "send":
            print(f"listening {peer.address[1]}", flush=True)
            other = peer.peers(wait_for=1, timeout=60)[0]
        else:
            other = peer.connect(("127.0.0.1", int(sys.argv[3])))
        SCENARIOS[scenario](peer, other, role)
        print(f"{role} ok", flush=True)
