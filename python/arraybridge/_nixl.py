"""Tensors of any framework between processes over NIXL (NVIDIA's transfer library, UCX
underneath). NIXL's own Python API takes compact PyTorch tensors or raw (address,
length, device) tuples, and every buffer must be registered first, which is expensive.
Here each peer keeps arenas of memory registered once (host memory from the pinned pool
where CUDA is present, VRAM from the device cache where UCX reaches it): a tensor of any
framework, strided, cast or on an OpenCL device, is packed by the runtime into a slot of
an arena, and the receiver READs it into a slot of its own, then unpacks it where asked.

The wire: one TCP connection per pair of peers carries the agents' metadata once, then
small JSON messages (an offer: where the packed bytes are; done: the slot may be reused).
The bytes themselves go through NIXL. A peer that disappears closes that connection, so
every wait ends with PeerLostError instead of a hang."""
import functools
import itertools
import json
import math
import selectors
import socket
import struct
import threading
import time

from ._errors import ArrayBridgeError
from ._lib import _core
from ._tensor import Tensor

_BLOCK_BYTES = 64 << 20  # an arena grows by at least this much: one registration serves many slots
_ALIGN = 4096  # slots start on page boundaries (what RDMA registration works in)
_FRAME = struct.Struct("!I")
_MAX_FRAME = 1 << 24  # a control message is small; a larger length is a broken or foreign peer
_READS_KEPT = 64  # READ requests kept for reuse (Peer._reads)
_NIXL_MODULES = ("nixl", "nixl_cu13", "nixl_cu12")
_IB_DEVICES = "/sys/class/infiniband"


class PeerLostError(ArrayBridgeError, ConnectionError):
    """The remote peer of a NIXL transfer closed its connection or died: the transfer
    did not complete, and nothing more will come from that peer."""

    def __init__(self, message):
        ArrayBridgeError.__init__(self, message, None, "peer_lost")


def _load_nixl():
    """NIXL's Python API (the `nixl` meta package, or a wheel for one CUDA major). Refused
    after TensorFlow: both bundle gRPC, and the second to register its flags aborts the
    process ("Flag 'grpc_experiments' was defined more than once"); NIXL first is fine."""
    import importlib
    import sys
    if "tensorflow" in sys.modules and not any(name in sys.modules for name in _NIXL_MODULES):
        raise ImportError("arraybridge.nixl: NIXL cannot be imported after TensorFlow: both bundle gRPC, and "
                          "importing the second aborts the process. Import arraybridge.nixl (or make a Peer, or "
                          "call arraybridge.ray.register) before TensorFlow")
    problems = []
    for name in _NIXL_MODULES:
        try:
            return importlib.import_module(name)
        except ImportError as error:
            problems.append(f"{name}: {error}")
    raise ImportError("arraybridge.nixl needs NIXL's Python API, which is not installed "
                      f"({'; '.join(problems)}): pip install --no-deps nixl-cu12 (it needs only NumPy)")


def _spare_the_exit():
    """nixl-cu12's UCX loads its InfiniBand module, whose libnl-route then crashes the process
    in its destructor at exit (SIGSEGV in rtnl_tc_unregister, nixl-cu12 1.5). Where the
    machine has no InfiniBand device that module has nothing to drive, so it is left out,
    unless the caller chose UCX's modules (UCX_MODULES) already."""
    import os
    if "UCX_MODULES" not in os.environ and not (os.path.isdir(_IB_DEVICES) and os.listdir(_IB_DEVICES)):
        os.environ["UCX_MODULES"] = "^ib"


def nixl_available():
    """Whether NIXL's Python API can be imported here (arraybridge.nixl needs it)."""
    try:
        _load_nixl()
        return True
    except ImportError:
        return False


def _round_up(n, step):
    return (n + step - 1) // step * step


class _Block:
    """One registered allocation: `base` is its address, `keep` what owns the memory,
    `free` its unused (offset, size) ranges in address order."""

    def __init__(self, base, size, keep, reg):
        self.base, self.size, self.keep, self.reg = base, size, keep, reg
        self.free = [(0, size)]


class _Slot:
    __slots__ = ("block", "offset", "nbytes", "address")

    def __init__(self, block, offset, nbytes):
        self.block, self.offset, self.nbytes, self.address = block, offset, nbytes, block.base + offset


class _Arena:
    """Memory of one kind (NIXL's "DRAM", or "VRAM" of one CUDA device) registered with the
    agent in blocks that are kept: a slot is cut from a block, and a block is added (and
    registered, which `registrations` counts) only when no free range is large enough."""

    def __init__(self, peer, mem, device_id):
        self.peer, self.mem, self.device_id = peer, mem, device_id
        self.blocks = []
        self.registrations = 0
        self.slots_in_use = 0
        self.lock = threading.Lock()  # sends and receives may come from several threads

    def take(self, nbytes):
        with self.lock:
            return self._take(_round_up(max(nbytes, 1), _ALIGN))

    def _take(self, size):
        for block in self.blocks:
            for i, (offset, free) in enumerate(block.free):
                if free >= size:
                    block.free[i:i + 1] = [(offset + size, free - size)] if free > size else []
                    self.slots_in_use += 1
                    return _Slot(block, offset, size)
        block = self._grow(max(size, _BLOCK_BYTES))
        block.free = [(size, block.size - size)] if block.size > size else []
        self.slots_in_use += 1
        return _Slot(block, 0, size)

    def give_back(self, slot):
        with self.lock:
            self._give_back(slot)

    def _give_back(self, slot):
        free = slot.block.free
        free.append((slot.offset, slot.nbytes))
        free.sort()
        merged = [free[0]]
        for offset, size in free[1:]:
            last_offset, last_size = merged[-1]
            if last_offset + last_size == offset:
                merged[-1] = (last_offset, last_size + size)
            else:
                merged.append((offset, size))
        slot.block.free = merged
        self.slots_in_use -= 1

    def _grow(self, size):
        keep, base = (self._vram(size) if self.mem == "VRAM" else self._host(size))
        reg = self.peer._call(self.peer._agent.register_memory, [(base, size, self.device_id, "")], self.mem)
        self.registrations += 1
        block = _Block(base, size, keep, reg)
        self.blocks.append(block)
        return block

    @staticmethod
    def _host(size):
        """Page-aligned host memory: from the pinned pool where a CUDA device is present
        (what a copy from or to the GPU wants), else a NumPy allocation."""
        import numpy as np
        if any(d.name == "cuda_host" for d in _devices()):
            pinned = _core.to_device(np.empty(size, np.uint8), "cuda_host")
            array = np.from_dlpack(pinned)
            if array.ctypes.data % _ALIGN == 0:
                return (pinned, array), array.ctypes.data
        raw = np.empty(size + _ALIGN, np.uint8)
        start = -raw.ctypes.data % _ALIGN
        array = raw[start:start + size]
        return (raw, array), array.ctypes.data

    def _vram(self, size):
        """Device memory from the device cache, viewed through torch for slicing."""
        import numpy as np
        import torch
        block = _core.to_device(np.zeros(size, np.uint8), f"cuda:{self.device_id}")
        view = torch.from_dlpack(block)
        return (block, view), view.data_ptr()

    def view(self, slot, dtype, shape, at=0):
        """The slot's bytes from `at` on as a compact array of `dtype` and `shape` (NumPy
        on the host, torch on a GPU), for the runtime to pack into or unpack from."""
        start = slot.offset + at
        raw = slot.block.keep[1][start:start + _nbytes(dtype, shape)]
        if self.mem == "VRAM":
            import torch
            return raw.view(getattr(torch, dtype)).view(shape)
        import numpy as np
        if dtype == "bfloat16":  # NumPy has none (ml_dtypes' exports no DLPack): torch views the same bytes
            import torch
            return torch.from_numpy(raw).view(torch.bfloat16).view(shape)
        return raw.view(np.dtype(dtype)).reshape(shape)

    def release(self):
        for block in self.blocks:
            try:
                self.peer._call(self.peer._agent.deregister_memory, block.reg)
            except Exception:  # closing: the agent may already refuse; the memory goes with the block
                pass
        self.blocks = []


def _devices():
    from ._device import devices
    return devices()


# The dtypes a slot can be viewed as (NumPy, or torch for bfloat16), so sent.
_SENDABLE = ("bool", "int8", "uint8", "int16", "uint16", "float16", "bfloat16", "int32", "uint32", "float32", "int64",
             "uint64", "float64", "complex64", "complex128")


@functools.lru_cache(maxsize=None)
def _itemsize(dtype):
    from ._dtype import parse_dtype  # the library's vocabulary: bits and lanes of the name
    _, bits, lanes = parse_dtype(dtype)
    return bits * lanes // 8


def _nbytes(dtype, shape):
    return _itemsize(dtype) * math.prod(shape)


class _Link:
    """The control connection to one remote peer. Whichever thread waits on it reads what
    has arrived (no thread of its own: a hop between threads costs more than the message):
    offers queue up for recv, acknowledgements for the sends waiting on them, and the end
    of the connection marks the link lost, which every waiter then sees."""

    def __init__(self, name, sock):
        self.name, self.sock = name, sock
        self.offers, self.acks = [], {}
        self.known_blocks = set()  # id()s of this side's blocks whose registration the remote agent knows
        self.lost = None  # why the link is gone, once it is
        self.send_lock, self.read_lock = threading.Lock(), threading.Lock()
        self.selector = selectors.DefaultSelector()
        self.selector.register(sock, selectors.EVENT_READ)

    def post(self, message):
        data = json.dumps(message).encode()
        try:
            with self.send_lock:
                self.sock.sendall(_FRAME.pack(len(data)) + data)
        except OSError as error:
            self.lost = self.lost or f"sending to it failed ({error})"
            raise PeerLostError(f"arraybridge.nixl: peer {self.name!r} is gone: {self.lost}") from None

    def pump(self, wait):
        """Reads the messages that arrive within `wait` seconds (0: only those already here)."""
        if self.lost is not None or not self.read_lock.acquire(blocking=False):
            time.sleep(min(wait, 0.001))  # another thread is reading for us
            return
        try:
            while self.lost is None and self.selector.select(wait):
                self._dispatch(_read_frame(self.sock))
                wait = 0
        except (OSError, ConnectionError, ValueError) as error:
            self.lost = str(error) or type(error).__name__
        finally:
            self.read_lock.release()

    def _dispatch(self, message):
        kind = message.get("type")
        if kind == "offer":
            self.offers.append(message)
        elif kind in ("done", "failed"):
            self.acks[message.get("id")] = message
        elif kind == "bye":
            raise ConnectionError("it closed its peer")

    def check(self, what):
        """PeerLostError when the link is gone; reads what has arrived first."""
        self.pump(0)
        if self.lost is not None:
            raise PeerLostError(f"arraybridge.nixl: peer {self.name!r} is gone ({self.lost}) while {what}")

    def wait_for(self, ready, deadline, what):
        """Reads messages until ready() gives a value; PeerLostError when the link goes
        first, TimeoutError past the deadline."""
        while True:
            value = ready()
            if value is not None:
                return value
            if self.lost is not None:
                raise PeerLostError(f"arraybridge.nixl: peer {self.name!r} is gone ({self.lost}) while waiting "
                                    f"for {what}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"arraybridge.nixl: no {what} from peer {self.name!r} in time")
            self.pump(min(left, 0.1))

    def close(self):
        try:
            self.post({"type": "bye"})
        except PeerLostError:
            pass
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.selector.close()
        self.sock.close()
        self.lost = self.lost or "closed here"


def _read_exactly(sock, n):
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("the connection closed")
        chunks += chunk
    return bytes(chunks)


def _read_frame(sock):
    (length,) = _FRAME.unpack(_read_exactly(sock, _FRAME.size))
    if length > _MAX_FRAME:
        raise ValueError(f"a control message of {length} bytes (at most {_MAX_FRAME}): not an arraybridge.nixl peer")
    message = json.loads(_read_exactly(sock, length))
    if not isinstance(message, dict):
        raise ValueError("a control message that is not a JSON object: not an arraybridge.nixl peer")
    return message


class NixlTransfer:
    """One send or receive under way. `wait()` blocks until it completes (a send: the
    receiver has read the bytes and its slot is free again; a receive: the tensor is
    there, and is returned); `done()` asks without blocking. A peer that dies makes
    either raise PeerLostError; one that stays silent, TimeoutError, after which the
    transfer may be waited for again (its slot stays taken until it ends or the peer
    closes)."""

    def __init__(self, peer, step, timeout):
        self._peer, self._step, self._timeout = peer, step, timeout
        self._finished, self._result, self._error = False, None, None

    def done(self):
        """Whether the transfer has completed (or failed: wait() then raises), without blocking."""
        if not self._finished:
            try:
                self._advance(block=False, deadline=0.0)
            except TimeoutError:
                return False
        return self._finished

    def wait(self, timeout=None):
        """Blocks until the transfer completes, at most `timeout` seconds (default: the
        peer's timeout); returns the received tensor for a receive, None for a send."""
        deadline = time.monotonic() + (self._timeout if timeout is None else timeout)
        while not self._finished:
            self._advance(block=True, deadline=deadline)
        if self._error is not None:
            raise self._error
        return self._result

    def _advance(self, block, deadline):
        try:
            finished, result = self._step(block, deadline)
        except TimeoutError:
            raise  # not an end: the transfer goes on, and wait() may be called again
        except Exception as error:
            self._finished, self._error = True, error
            return
        if finished:
            self._finished, self._result = True, result


class NixlPeer:
    """A NIXL agent (UCX) that sends and receives tensors of any framework:

        peer = arraybridge.nixl.Peer("decode", listen=("127.0.0.1", 0))
        other = peer.connect(("10.0.0.2", 5555))   # or the other side connects to peer.address
        peer.send(torch_or_cupy_or_numpy_tensor, to=other).wait()
        x = peer.recv(other, device="cuda:0").wait()

    A sent tensor is packed by the runtime (strided, cast with `dtype=`, from CUDA or
    OpenCL) into memory this peer registered once; the receiver READs it into its own
    registered memory and unpacks it into `out=` or a new tensor on `device`. Every
    wait has a timeout (`timeout` seconds unless given), and a peer that dies ends it
    with PeerLostError. Close the peer (or use it in a `with` block) to free the
    agent, its registrations and its connections.

    NixlPeer(name, listen=("127.0.0.1", 0), *, timeout=30.0, backends=("UCX",)): `name`
    is the agent's, unique among the peers; `listen` where it accepts connections
    (port 0: any free one, then in `.address`)."""

    def __init__(self, name, listen=("127.0.0.1", 0), *, timeout=30.0, backends=("UCX",)):
        if not isinstance(name, str) or not name:
            raise ValueError(f"a NIXL peer's name must be a non-empty string, not {name!r}")
        nixl = _load_nixl()
        _spare_the_exit()
        self.name, self.timeout = name, float(timeout)
        self._agent_lock = threading.RLock()  # the agent's sync mode is NONE: one caller at a time
        self._agent = nixl.nixl_agent(name, nixl.nixl_agent_config(backends=list(backends)))
        self._arenas = {}
        self._links = {}
        self._links_changed = threading.Condition()
        self._ids = itertools.count(1)
        self._counts = {"sends": 0, "receives": 0, "bytes_sent": 0, "bytes_received": 0, "reads_reused": 0}
        # READ requests kept for reuse (under _agent_lock), oldest first, by link, local
        # address and memory, and the remote (address, bytes, device, memory): NIXL's request
        # is posted again for the next tensor of that size, since slots and the sender's
        # blocks come back to the same addresses; that skips making and preparing one.
        self._reads = {}
        self._known_remote_blocks = set()  # (peer, block base) whose registration read() loaded
        self._closed = False
        self._server = socket.create_server(listen)
        self.address = self._server.getsockname()[:2]  # (host, port): where other peers connect
        self._acceptor = threading.Thread(target=self._accept, name=f"arraybridge-nixl-accept-{name}", daemon=True)
        self._acceptor.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"arraybridge.nixl.Peer({self.name!r}, address={self.address}, peers={sorted(self._links)})"

    def _call(self, function, *args):
        with self._agent_lock:
            return function(*args)

    # --- connections -------------------------------------------------------------------

    def connect(self, address, timeout=None):
        """Connects to the peer listening at `address` (host, port), exchanging the agents'
        metadata; returns its name, what send(to=) and recv() take."""
        timeout = self.timeout if timeout is None else timeout
        sock = socket.create_connection(tuple(address), timeout=timeout)
        return self._handshake(sock, timeout)

    def peers(self, wait_for=0, timeout=None):
        """The names of the connected peers; with wait_for=N, first waits (at most `timeout`)
        until N are connected (for a side that listens)."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        with self._links_changed:
            while len(self._links) < wait_for:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"arraybridge.nixl: {len(self._links)} of {wait_for} peers connected to "
                                       f"{self.name!r} in time")
                self._links_changed.wait(left)
            return sorted(self._links)

    def _accept(self):
        while True:
            try:
                sock, _ = self._server.accept()
            except OSError:
                return  # closed
            try:
                self._handshake(sock, self.timeout)
            except Exception:  # a foreign or failed client: drop it, keep listening
                sock.close()

    def _handshake(self, sock, timeout):
        sock.settimeout(timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._agent_lock:  # the blocks the metadata describes, taken together with it
            metadata = self._agent.get_agent_metadata()
            described = {id(b) for a in list(self._arenas.values()) for b in a.blocks}
        hello = json.dumps({"type": "hello", "name": self.name, "metadata": metadata.hex()}).encode()
        sock.sendall(_FRAME.pack(len(hello)) + hello)
        reply = _read_frame(sock)
        remote = reply.get("name")
        if reply.get("type") != "hello" or not isinstance(remote, str) or not isinstance(reply.get("metadata"), str):
            sock.close()
            raise ConnectionError("arraybridge.nixl: the other side did not introduce itself as a peer")
        with self._links_changed:
            if remote in self._links or remote == self.name:
                sock.close()
                raise ValueError(f"arraybridge.nixl: a peer named {remote!r} is already connected to {self.name!r}")
            self._call(self._agent.add_remote_agent, bytes.fromhex(reply["metadata"]))
            sock.settimeout(None)  # the reader blocks; its waits are bounded by the waiters' deadlines
            link = _Link(remote, sock)
            link.known_blocks.update(described)
            self._links[remote] = link
            self._links_changed.notify_all()
        return remote

    def _link(self, name):
        if self._closed:
            raise ValueError(f"arraybridge.nixl: peer {self.name!r} is closed")
        if name is None:
            if len(self._links) != 1:
                raise ValueError(f"arraybridge.nixl: name the peer (connected: {sorted(self._links)})")
            return next(iter(self._links.values()))
        link = self._links.get(name)
        if link is None:
            raise ValueError(f"arraybridge.nixl: no peer named {name!r} is connected to {self.name!r} "
                             f"(connected: {sorted(self._links)})")
        return link

    # --- memory ------------------------------------------------------------------------

    def _arena(self, device):
        """The arena for a tensor on `device`: its GPU's VRAM where UCX reaches it, else host memory."""
        kind, _, index = device.partition(":")
        key = ("VRAM", int(index or 0)) if kind == "cuda" and self._reaches_vram() else ("DRAM", 0)
        with self._agent_lock:  # one arena per key, whichever thread asks first
            if key not in self._arenas:
                self._arenas[key] = _Arena(self, *key)
            return self._arenas[key]

    def _reaches_vram(self):
        """UCX moves VRAM itself when it was built with CUDA and a real GPU is there (torch
        sees one: the fake driver of the tests is not one)."""
        if not hasattr(self, "_vram"):
            self._vram = False
            if "VRAM_SEG" in self._call(self._agent.get_backend_mem_types, "UCX"):
                try:
                    import torch
                    self._vram = bool(torch.cuda.is_available())
                except ImportError:
                    pass
        return self._vram

    def stats(self):
        """Counters: `registrations` (blocks registered with NIXL since the start: flat
        after warm-up, however many tensors follow), `registered_bytes`, `slots_in_use`,
        sends and receives with their bytes, `reads_reused` (receives that posted a READ
        request kept from an earlier one of the same size instead of making one), and the
        first three per arena ("DRAM:0", "VRAM:0")."""
        arenas = {f"{mem}:{index}": {"registrations": a.registrations,
                                     "registered_bytes": sum(b.size for b in a.blocks),
                                     "slots_in_use": a.slots_in_use} for (mem, index), a in self._arenas.items()}
        totals = {key: sum(a[key] for a in arenas.values())
                  for key in ("registrations", "registered_bytes", "slots_in_use")}
        return dict(totals, **self._counts, arenas=arenas)

    # --- transfers ---------------------------------------------------------------------

    def send(self, x, to=None, *, dtype=None, timeout=None):
        """Offers `x` (any DLPack array: NumPy, torch, CuPy, JAX, an arraybridge Tensor; strided,
        on the CPU, a CUDA GPU or an OpenCL device) to peer `to` (its name; may be left out
        with one peer connected), packed into this peer's registered memory (cast to `dtype`
        on the way if given). Returns a NixlTransfer; its wait() returns once the receiver
        has read the bytes. `x` may be reused as soon as send returns."""
        link = self._link(to)
        tensor = x if isinstance(x, Tensor) else _core.from_dlpack(x)
        kind = tensor.dtype if dtype is None else _dtype_name(dtype)
        if kind not in _SENDABLE:
            raise ValueError(f"arraybridge.nixl: a {kind} tensor cannot be sent (dtypes: {', '.join(_SENDABLE)})")
        shape = list(tensor.shape)
        nbytes = _nbytes(kind, shape)
        arena = self._arena(tensor.device)
        slot = arena.take(nbytes)
        try:
            if nbytes:
                _core.copy(tensor, arena.view(slot, kind, shape))
            ident = next(self._ids)
            offer = {"type": "offer", "id": ident, "address": slot.address, "nbytes": nbytes, "mem": arena.mem,
                     "device": arena.device_id, "shape": shape, "dtype": kind}
            if id(slot.block) not in link.known_blocks:  # registered after the handshake: the reader learns it now
                offer["metadata"] = self._call(self._agent.get_partial_agent_metadata, slot.block.reg).hex()
            link.post(offer)
            link.known_blocks.add(id(slot.block))
        except BaseException:
            arena.give_back(slot)
            raise
        with self._agent_lock:
            self._counts["sends"] += 1
            self._counts["bytes_sent"] += nbytes

        def step(block, deadline):
            try:
                if block:
                    ack = link.wait_for(lambda: link.acks.pop(ident, None), deadline, f"the receipt of send {ident}")
                else:
                    link.check(f"waiting for the receipt of send {ident}")
                    ack = link.acks.pop(ident, None)
                    if ack is None:
                        return False, None
            except PeerLostError:
                arena.give_back(slot)  # nobody reads it any more
                raise
            arena.give_back(slot)
            if ack["type"] == "failed":
                raise ArrayBridgeError(f"arraybridge.nixl: peer {link.name!r} could not receive send {ident}: "
                                       f"{ack.get('reason')}", None, "receive_failed")
            return True, None
        return NixlTransfer(self, step, self.timeout if timeout is None else timeout)

    def recv(self, source=None, *, out=None, device="cpu", timeout=None):
        """Receives the next tensor peer `source` sent (its name; may be left out with one peer
        connected): waits for its offer (at most `timeout` seconds), then starts reading it
        through NIXL and returns a NixlTransfer, whose wait() returns the tensor: `out`
        (any DLPack array of the same shape, strided or another dtype allowed, filled in
        place), or a new arraybridge Tensor on `device`."""
        link = self._link(source)
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        offer = link.wait_for(lambda: link.offers.pop(0) if link.offers else None, deadline, "offer")
        ident, shape, kind, nbytes, remote = _checked_offer(offer, link.name)
        if "metadata" in offer:  # the sender registered more memory since the handshake
            try:
                self._call(self._agent.add_remote_agent, bytes.fromhex(offer["metadata"]))
            except Exception as error:
                if not _disconnected(error):
                    raise
                raise PeerLostError(f"arraybridge.nixl: peer {link.name!r} is gone ({_why_lost(link)}) before "
                                    f"its offer of {nbytes} bytes was read") from error
        landing = None if out is None else out if isinstance(out, Tensor) else _core.from_dlpack(out)
        if landing is not None and tuple(landing.shape) != shape:
            _tell(link, {"type": "failed", "id": ident, "reason": f"out= has shape {landing.shape}"})
            raise ValueError(f"arraybridge.nixl: peer {link.name!r} sent shape {shape}, but out= has shape "
                             f"{tuple(landing.shape)}")
        arena = self._arena(device if landing is None else landing.device)
        slot = arena.take(nbytes)
        # This link's only (never a successor's), this slot's, and the remote bytes'.
        handle, key = None, (link, slot.address, arena.mem, arena.device_id) + remote
        try:
            if nbytes:
                with self._agent_lock:
                    handle = self._reads.pop(key, None)  # out of the cache while in use
                    self._counts["reads_reused"] += handle is not None
                if handle is None:
                    local = self._call(self._agent.get_xfer_descs, [(slot.address, nbytes, arena.device_id)],
                                       arena.mem)
                    far = self._call(self._agent.get_xfer_descs, [remote[:3]], remote[3])
                    handle = self._call(self._agent.initialize_xfer, "READ", local, far, link.name)
                if self._call(self._agent.transfer, handle) == "ERR":
                    raise ArrayBridgeError(f"arraybridge.nixl: NIXL refused to start reading {nbytes} bytes from "
                                           f"peer {link.name!r}", None, "transfer_failed")
        except Exception as error:
            self._finish_read(handle, arena, slot, safe=True, key=None)
            _tell(link, {"type": "failed", "id": ident, "reason": str(error)})
            link.pump(1.0 if _disconnected(error) else 0)  # NIXL may notice before the socket's end arrives
            if link.lost is not None or _disconnected(error):
                raise PeerLostError(f"arraybridge.nixl: peer {link.name!r} is gone ({_why_lost(link)}) before "
                                    f"reading {nbytes} bytes from it") from error
            if isinstance(error, ArrayBridgeError):
                raise
            raise ArrayBridgeError(f"arraybridge.nixl: NIXL could not start reading {nbytes} bytes from peer "
                                   f"{link.name!r}: {type(error).__name__} {error}", None, "transfer_failed") from error
        with self._agent_lock:
            self._counts["receives"] += 1
            self._counts["bytes_received"] += nbytes

        def step(block, end):
            polls, failure = 0, None
            while True:
                try:
                    state = "DONE" if handle is None else self._call(self._agent.check_xfer_state, handle)
                except Exception as error:  # NIXL raises some failures (a remote that disconnected)
                    state, failure = "ERR", error
                if state == "DONE":
                    break
                link.pump(1.0 if state == "ERR" else 0)  # a failed READ: is the peer gone? its socket says
                if state == "ERR" or link.lost is not None:
                    self._finish_read(handle, arena, slot, safe=False, key=None)
                    if link.lost is not None or (state == "ERR" and _disconnected(failure)):
                        raise PeerLostError(f"arraybridge.nixl: peer {link.name!r} is gone ({_why_lost(link)}) "
                                            f"while reading {nbytes} bytes from it")
                    _tell(link, {"type": "failed", "id": ident, "reason": "NIXL reported an error reading it"})
                    raise ArrayBridgeError(f"arraybridge.nixl: NIXL failed reading {nbytes} bytes from peer "
                                           f"{link.name!r}", None, "transfer_failed")
                if not block:
                    return False, None
                if time.monotonic() > end:
                    raise TimeoutError(f"arraybridge.nixl: reading {nbytes} bytes from peer {link.name!r} did not "
                                       "complete in time")
                polls += 1
                if polls > 100:  # a long transfer: stop spinning, the progress threads need the cores
                    link.pump(0.0005)
            receipt = {"type": "done", "id": ident}
            try:
                view = arena.view(slot, kind, shape)
                if out is not None:
                    # Into `out` itself where it is a producer, not the view of it: a torch out= is then
                    # vetted and its version bumped as any copy destination's (autograd sees the write).
                    _core.copy(view, out if hasattr(out, "__dlpack__") else landing)
                    result = out
                else:
                    result = _core.to_device(view, device, copy=True)
            except Exception as error:
                receipt = {"type": "failed", "id": ident, "reason": str(error)}
                raise
            finally:
                self._finish_read(handle, arena, slot, safe=True, key=key)
                _tell(link, receipt)
            return True, result
        return NixlTransfer(self, step, timeout)

    # --- published tensors: one-sided reads ---------------------------------------------

    def publish(self, xs):
        """Packs the arrays `xs` (any DLPack arrays: strided, of any framework, on the CPU, a
        CUDA GPU or an OpenCL device) into one slot of this peer's registered memory, each
        from a 256-byte boundary, in one batch. Returns (handle, description): any peer
        given the description (plain JSON values) reads them with read(), as often as it
        likes and with no message to this peer (a one-sided READ), until withdraw(handle)."""
        if self._closed:
            raise ValueError(f"arraybridge.nixl: peer {self.name!r} is closed")
        tensors = [x if isinstance(x, Tensor) else _core.from_dlpack(x) for x in xs]
        entries, end = [], 0
        for tensor in tensors:
            if tensor.dtype not in _SENDABLE:
                raise ValueError(f"arraybridge.nixl: a {tensor.dtype} tensor cannot be published "
                                 f"(dtypes: {', '.join(_SENDABLE)})")
            entries.append({"shape": list(tensor.shape), "dtype": tensor.dtype, "at": end,
                            "read_only": tensor.read_only})
            end = _round_up(end + _nbytes(tensor.dtype, list(tensor.shape)), 256)
        devices = {tensor.device for tensor in tensors}
        arena = self._arena(devices.pop() if len(devices) == 1 else "cpu")
        slot = arena.take(end)
        try:
            views = [arena.view(slot, e["dtype"], e["shape"], e["at"]) for e in entries]
            if tensors:
                _core.copy_many(tensors, views)  # one batch: strided packed, devices read, in one call
            metadata = self._call(self._agent.get_partial_agent_metadata, slot.block.reg).hex()
        except BaseException:
            arena.give_back(slot)
            raise
        description = {"peer": self.name, "address": list(self.address), "slot": slot.address, "nbytes": end,
                       "mem": arena.mem, "device": arena.device_id, "block": slot.block.base, "metadata": metadata,
                       "tensors": entries}
        return (arena, slot), description

    def withdraw(self, handle):
        """Gives back the slot publish() took: nobody may read that description any more."""
        arena, slot = handle
        arena.give_back(slot)

    def read(self, description, *, device="cpu", timeout=None, abort=None, read_only=True):
        """The Tensors a peer published (publish()'s description), READ from its memory and
        unpacked on `device`; read-only where the source was (read_only=False: never, for a
        framework without read-only arrays, to which they are private copies all the same).
        Connects to that peer first where it is not connected yet. Its death raises
        PeerLostError; `abort` (a threading.Event) set from another thread ends the wait
        with ArrayBridgeError."""
        name, address, entries, nbytes, remote = _checked_publication(description)
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        link = self._links.get(name)
        if link is None:
            try:
                connected = self.connect(address, timeout=max(deadline - time.monotonic(), 0.001))
            except OSError as error:
                raise PeerLostError(f"arraybridge.nixl: peer {name!r} at {address} cannot be reached "
                                    f"({error})") from error
            except ValueError:
                if name not in self._links:  # not another thread that connected it meanwhile: refused
                    raise
                connected = name
            if connected != name:
                raise ArrayBridgeError(f"arraybridge.nixl: the peer at {address} is {connected!r}, not {name!r}",
                                       None, "malformed_offer")
            link = self._link(name)
        key = (name, description["block"])
        if key not in self._known_remote_blocks:  # registered after our handshake, maybe: its registration
            try:
                self._call(self._agent.add_remote_agent, bytes.fromhex(description["metadata"]))
            except Exception as error:
                if not _disconnected(error):
                    raise
                raise PeerLostError(f"arraybridge.nixl: peer {name!r} is gone ({_why_lost(link)})") from error
            self._known_remote_blocks.add(key)
        arena = self._arena(device)
        slot = arena.take(nbytes)
        handle, safe = None, True
        try:
            if nbytes:
                local = self._call(self._agent.get_xfer_descs, [(slot.address, nbytes, arena.device_id)], arena.mem)
                far = self._call(self._agent.get_xfer_descs, [remote[:3]], remote[3])
                handle = self._call(self._agent.initialize_xfer, "READ", local, far, name)
                if self._call(self._agent.transfer, handle) == "ERR":  # refused: nothing was posted
                    raise ArrayBridgeError(f"arraybridge.nixl: NIXL refused to read {nbytes} bytes from peer "
                                           f"{name!r}", None, "transfer_failed")
                safe = False  # posted: the slot may be written until the READ ends
                self._wait_read(handle, link, nbytes, deadline, abort)
                safe = True
            results = []
            for e in entries:
                tensor = _core.to_device(arena.view(slot, e["dtype"], tuple(e["shape"]), e["at"]), device, copy=True)
                # A legacy capsule imports read-only: the copy's one view that says so.
                marked = read_only and e["read_only"]
                results.append(_core.from_dlpack(_core.export(tensor, False, False)) if marked else tensor)
            with self._agent_lock:
                self._counts["receives"] += len(entries)
                self._counts["bytes_received"] += nbytes
            return results
        finally:
            if handle is not None:
                try:
                    self._call(self._agent.release_xfer_handle, handle)
                except Exception:  # a READ still under way on a lost peer: the slot is kept out of use
                    safe = False
            if safe:
                arena.give_back(slot)

    def _wait_read(self, handle, link, nbytes, deadline, abort):
        """Until the READ of `handle` completes: PeerLostError when its peer goes,
        TimeoutError past the deadline, ArrayBridgeError when `abort` is set."""
        polls = 0
        while True:
            failure = None
            try:
                state = self._call(self._agent.check_xfer_state, handle)
            except Exception as error:  # NIXL raises some failures (a remote that disconnected)
                state, failure = "ERR", error
            if state == "DONE":
                return
            link.pump(1.0 if state == "ERR" else 0)  # a failed READ: is the peer gone? its socket says
            if link.lost is not None or (state == "ERR" and _disconnected(failure)):
                raise PeerLostError(f"arraybridge.nixl: peer {link.name!r} is gone ({_why_lost(link)}) while "
                                    f"reading {nbytes} bytes from it")
            if state == "ERR":
                raise ArrayBridgeError(f"arraybridge.nixl: NIXL failed reading {nbytes} bytes from peer "
                                       f"{link.name!r}", None, "transfer_failed")
            if abort is not None and abort.is_set():
                raise ArrayBridgeError(f"arraybridge.nixl: reading {nbytes} bytes from peer {link.name!r} was "
                                       "aborted", None, "aborted")
            if time.monotonic() > deadline:
                raise TimeoutError(f"arraybridge.nixl: reading {nbytes} bytes from peer {link.name!r} did not "
                                   "complete in time")
            polls += 1
            if polls > 100:  # a long transfer: stop spinning, the progress threads need the cores
                link.pump(0.0005)

    def _finish_read(self, handle, arena, slot, safe, key):
        """Releases a READ's slot, and its request unless `key` keeps it for reuse (a READ
        that completed). A READ that may still be writing (safe=False) keeps its slot out of
        use for good rather than let the next transfer share it."""
        evicted = None
        if handle is not None and key is not None:
            with self._agent_lock:
                if not self._closed and key[0].lost is None:  # else released below: nothing would post it again
                    self._reads[key] = handle
                    evicted = self._reads.pop(next(iter(self._reads))) if len(self._reads) > _READS_KEPT else None
                    handle = None
        if evicted is not None:  # an older READ's request, long completed: its failure is no concern of this slot
            self._release_quietly(evicted)
        if handle is not None:
            try:
                self._call(self._agent.release_xfer_handle, handle)
            except Exception:
                safe = key is not None  # a completed READ's slot is free whatever NIXL says of its request
        if safe:
            arena.give_back(slot)

    def _forget_reads(self):
        """Releases the READ requests kept for reuse."""
        with self._agent_lock:
            kept, self._reads = list(self._reads.values()), {}
        for handle in kept:
            self._release_quietly(handle)

    def _release_quietly(self, handle):
        try:
            self._call(self._agent.release_xfer_handle, handle)
        except Exception:  # the agent may have dropped it with its remote, or be closed
            pass

    def close(self):
        """Tells the connected peers, closes the connections, deregisters the arenas and lets
        the agent go. Transfers still under way end with PeerLostError on the other side."""
        if self._closed:
            return
        self._closed = True
        try:
            self._server.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread, which then ends
        except OSError:
            pass
        self._server.close()
        self._forget_reads()
        for name, link in list(self._links.items()):
            link.close()
            try:
                self._call(self._agent.remove_remote_agent, name)
            except Exception:  # the agent may have dropped it already
                pass
        for arena in self._arenas.values():
            arena.release()
        self._links.clear()
        self._agent = None


def _disconnected(error):
    """Whether a NIXL exception says the remote agent disconnected (NIXL_ERR_REMOTE_DISCONNECT)."""
    return error is not None and ("RemoteDisconnect" in type(error).__name__ or "REMOTE_DISCONNECT" in str(error))


def _why_lost(link):
    return link.lost or "NIXL: the remote agent disconnected"


def _tell(link, message):
    try:
        link.post(message)
    except PeerLostError:
        pass  # the sender is gone: nobody is waiting for this


def _dtype_name(dtype):
    from ._dtype import dtype_name, parse_dtype
    return dtype_name(*parse_dtype(dtype))


def _checked_publication(description):
    """(peer, address, entries, nbytes, (address, nbytes, device, mem)) of a publication, each
    field checked: it came through another process."""
    try:
        name, address, entries = description["peer"], tuple(description["address"]), description["tensors"]
        nbytes, slot, mem, device = description["nbytes"], description["slot"], description["mem"], description["device"]
        int(description["block"]), bytes.fromhex(description["metadata"])
        ends = [e["at"] + _nbytes(e["dtype"], e["shape"]) for e in entries]
        valid = (isinstance(name, str) and len(address) == 2 and isinstance(nbytes, int) and isinstance(slot, int)
                 and isinstance(device, int) and mem in ("DRAM", "VRAM")
                 and all(e["dtype"] in _SENDABLE and all(isinstance(n, int) and n >= 0 for n in e["shape"])
                         and isinstance(e["at"], int) and e["at"] >= 0 and isinstance(e["read_only"], bool)
                         for e in entries)
                 and all(end <= nbytes for end in ends))
    except (KeyError, TypeError, ValueError, AttributeError):
        valid = False
    if not valid:
        raise ArrayBridgeError(f"arraybridge.nixl: a malformed publication: {description!r}", None, "malformed_offer")
    return name, address, entries, nbytes, (slot, nbytes, device, mem)


def _checked_offer(offer, name):
    """(id, shape, dtype, nbytes, (address, nbytes, device, mem)) from a remote offer, each
    field checked: it came over the network."""
    shape, kind, nbytes = offer.get("shape"), offer.get("dtype"), offer.get("nbytes")
    address, device, mem, ident = offer.get("address"), offer.get("device"), offer.get("mem"), offer.get("id")
    if not (isinstance(shape, list) and all(isinstance(n, int) and n >= 0 for n in shape) and kind in _SENDABLE
            and isinstance(nbytes, int) and nbytes == _nbytes(kind, shape) and isinstance(address, int)
            and isinstance(device, int) and mem in ("DRAM", "VRAM") and isinstance(ident, int)):
        raise ArrayBridgeError(f"arraybridge.nixl: peer {name!r} sent a malformed offer: {offer!r}", None,
                               "malformed_offer")
    return ident, tuple(shape), kind, nbytes, (address, nbytes, device, mem)
