"""The NIXL peer: an agent that sends, receives, publishes and reads tensors of any
framework (Peer), and one transfer under way (Transfer). It carries out the
moves over the wire (_wire) from and into registered memory (_arena)."""
import itertools
import json
import secrets
import socket
import threading
import time

from .._errors import ArrayBridgeError, PeerLostError
from .._lib import _core
from .._tensor import Tensor
from ._arena import Arena
from ._load import load_nixl, warn_of_infiniband
from ._wire import (FRAME, SENDABLE, STAMP_BYTES, Link, canonical_dtype, checked_offer, checked_publication,
                    nbytes_of, read_frame, round_up, tell, why_lost)

_READS_KEPT = 64  # READ requests kept for reuse (Peer._reads)


def _refuse_a_refused_cast(kind, to, casting):
    """Raises what copy would raise for a `kind` -> `to` copy under `casting` (the
    planner's rule, asked of two empty arrays), before a single byte is read."""
    import numpy as np
    nothing = np.empty(0, np.uint8)
    _core.copy(_core.to_device(nothing, "cpu", dtype=kind), _core.to_device(nothing, "cpu", dtype=to), casting=casting)


class Transfer:
    """One send or receive under way. `wait()` blocks until it completes (a send: the
    receiver has read the bytes and its slot is free again; a receive: the tensor is
    there, and is returned); `done()` asks without blocking. A peer that dies makes
    either raise PeerLostError; one that stays silent, TimeoutError, after which the
    transfer may be waited for again. A send's slot comes back when the receiver answers
    (or its link goes), whether or not anyone waits for the Transfer."""

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


class Peer:
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

    Peer(name, listen=("127.0.0.1", 0), *, timeout=30.0, backends=("UCX",)): `name`
    is the agent's, unique among the peers; `listen` where it accepts connections
    (port 0: any free one, then in `.address`)."""

    def __init__(self, name, listen=("127.0.0.1", 0), *, timeout=30.0, backends=("UCX",)):
        if not isinstance(name, str) or not name:
            raise ValueError(f"a NIXL peer's name must be a non-empty string, not {name!r}")
        nixl = load_nixl()
        warn_of_infiniband()
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
        self._reading = 0  # read() calls under way: close() lets their arenas go only after them
        self._reads_done = threading.Condition()
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
        if self._closed:
            raise ValueError(f"arraybridge.nixl: peer {self.name!r} is closed")
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
        sock.sendall(FRAME.pack(len(hello)) + hello)
        reply = read_frame(sock)
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
            link = Link(remote, sock)
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
                self._arenas[key] = Arena(self, *key)
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
        on the way if given, any cast, as to_device's dtype= and NumPy's astype). Returns a
        Transfer; its wait() returns once the receiver has read the bytes. `x` may be reused as soon as send returns."""
        link = self._link(to)
        tensor = x if isinstance(x, Tensor) else _core.from_dlpack(x)
        kind = tensor.dtype if dtype is None else canonical_dtype(dtype)
        if kind not in SENDABLE:
            raise ValueError(f"arraybridge.nixl: a {kind} tensor cannot be sent (dtypes: {', '.join(SENDABLE)})")
        if link.receipts:  # sends still unanswered: the receipts already here give their slots back first
            link.pump(0)
        shape = list(tensor.shape)
        nbytes = nbytes_of(kind, shape)
        arena = self._arena(tensor.device)
        slot = arena.take(nbytes)
        ident = next(self._ids)
        receipt = None
        try:
            if nbytes:
                # A dtype asked for casts as astype does; none asked, the dtypes are the same.
                _core.copy(tensor, arena.view(slot, kind, shape), casting="unsafe")
            offer = {"type": "offer", "id": ident, "address": slot.address, "nbytes": nbytes, "mem": arena.mem,
                     "device": arena.device_id, "shape": shape, "dtype": kind}
            if id(slot.block) not in link.known_blocks:  # registered after the handshake: the reader learns it now
                offer["metadata"] = self._call(self._agent.get_partial_agent_metadata, slot.block.reg).hex()
            # Expected before it is posted: its answer may come at once, to another thread's read.
            # Its slot goes back with the answer (or the link's end), waited for or not.
            receipt = link.expect(ident, arena, slot)
            link.post(offer)
            link.known_blocks.add(id(slot.block))
        except BaseException:
            if receipt is None or link.forget(ident):
                arena.give_back(slot)
            raise
        with self._agent_lock:
            self._counts["sends"] += 1
            self._counts["bytes_sent"] += nbytes

        def step(block, deadline):
            if block:
                ack = link.wait_for(lambda: receipt.answer, deadline, f"the receipt of send {ident}")
            else:
                ack = receipt.answer
                if ack is None:
                    link.check(f"waiting for the receipt of send {ident}")
                    ack = receipt.answer
                    if ack is None:
                        return False, None
            if ack["type"] == "failed":
                raise ArrayBridgeError(f"arraybridge.nixl: peer {link.name!r} could not receive send {ident}: "
                                       f"{ack.get('reason')}", None, "receive_failed")
            return True, None
        return Transfer(self, step, self.timeout if timeout is None else timeout)

    def recv(self, source=None, *, out=None, device="cpu", timeout=None, casting=None):
        """Receives the next tensor peer `source` sent (its name; may be left out with one peer
        connected): waits for its offer (at most `timeout` seconds), then starts reading it
        through NIXL and returns a Transfer, whose wait() returns the tensor: `out`
        (any DLPack array of the same shape, strided allowed, filled in place; another dtype
        is converted as copy's `casting` allows, by default "same_kind"; an `out` copy
        would refuse, read-only or a refused cast, raises here, before anything is read,
        and the sender's wait() says why), or a new arraybridge Tensor on `device`."""
        link = self._link(source)
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        offer = link.wait_for(lambda: link.offers.pop(0) if link.offers else None, deadline, "offer")
        ident, shape, kind, nbytes, remote = checked_offer(offer, link.name)
        if "metadata" in offer:  # the sender registered more memory since the handshake
            try:
                self._call(self._agent.add_remote_agent, bytes.fromhex(offer["metadata"]))
            except Exception as error:
                if not _disconnected(error):
                    raise
                raise PeerLostError(f"arraybridge.nixl: peer {link.name!r} is gone ({why_lost(link)}) before "
                                    f"its offer of {nbytes} bytes was read") from error
        landing = None if out is None else out if isinstance(out, Tensor) else _core.from_dlpack(out)
        if landing is not None and tuple(landing.shape) != shape:
            tell(link, {"type": "failed", "id": ident, "reason": f"out= has shape {landing.shape}"})
            raise ValueError(f"arraybridge.nixl: peer {link.name!r} sent shape {shape}, but out= has shape "
                             f"{tuple(landing.shape)}")
        if out is not None:  # what copy into out would refuse, refused before a byte is read
            try:
                _core.vet_destination(out if hasattr(out, "__dlpack__") else landing, "arraybridge.nixl recv")
                if landing.dtype != kind:
                    _refuse_a_refused_cast(kind, landing.dtype, casting)
            except Exception as error:
                tell(link, {"type": "failed", "id": ident, "reason": f"out= refused it: {error}"})
                raise
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
            tell(link, {"type": "failed", "id": ident, "reason": str(error)})
            link.pump(1.0 if _disconnected(error) else 0)  # NIXL may notice before the socket's end arrives
            if link.lost is not None or _disconnected(error):
                raise PeerLostError(f"arraybridge.nixl: peer {link.name!r} is gone ({why_lost(link)}) before "
                                    f"reading {nbytes} bytes from it") from error
            if isinstance(error, ArrayBridgeError):
                raise
            raise ArrayBridgeError(f"arraybridge.nixl: NIXL could not start reading {nbytes} bytes from peer "
                                   f"{link.name!r}: {type(error).__name__} {error}", None, "transfer_failed") from error
        with self._agent_lock:
            self._counts["receives"] += 1
            self._counts["bytes_received"] += nbytes

        def step(block, end):
            try:
                if handle is not None and not self._poll_read(handle, link, nbytes, block, end):
                    return False, None
            except TimeoutError:
                raise  # not an end: the READ goes on, and its slot with it
            except Exception as error:
                self._finish_read(handle, arena, slot, safe=False, key=None)
                if not isinstance(error, PeerLostError):
                    tell(link, {"type": "failed", "id": ident, "reason": "NIXL reported an error reading it"})
                raise
            receipt = {"type": "done", "id": ident}
            try:
                view = arena.view(slot, kind, shape)
                if out is not None:
                    # Into `out` itself where it is a producer, not the view of it: a torch out= is then
                    # vetted and its version bumped as any copy destination's (autograd sees the write).
                    _core.copy(view, out if hasattr(out, "__dlpack__") else landing, casting=casting)
                    result = out
                else:
                    result = _core.to_device(view, device, copy=True)
            except Exception as error:
                receipt = {"type": "failed", "id": ident, "reason": str(error)}
                raise
            finally:
                self._finish_read(handle, arena, slot, safe=True, key=key)
                tell(link, receipt)
            return True, result
        return Transfer(self, step, timeout)

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
        for index, tensor in enumerate(tensors):
            if tensor.dtype not in SENDABLE:  # named by its place: a structure's keys are not here
                raise ValueError(f"arraybridge.nixl: array {index} of the {len(tensors)} to publish, a {tensor.dtype} "
                                 f"tensor of shape {tuple(tensor.shape)}, cannot be published "
                                 f"(dtypes: {', '.join(SENDABLE)})")
            entries.append({"shape": list(tensor.shape), "dtype": tensor.dtype, "at": end,
                            "read_only": tensor.read_only})
            end = round_up(end + nbytes_of(tensor.dtype, list(tensor.shape)), 256)
        devices = {tensor.device for tensor in tensors}
        arena = self._arena(devices.pop() if len(devices) == 1 else "cpu")
        stamp_at, token = end, secrets.randbits(63) | 1  # after the data: what a reader checks it read
        slot = arena.take(end + STAMP_BYTES)
        try:
            views = [arena.view(slot, e["dtype"], e["shape"], e["at"]) for e in entries]
            stamp = _stamp(token)
            _core.copy_many(tensors + [stamp], views + [_stamp_view(arena, slot, stamp_at)])  # one batch
            metadata = self._call(self._agent.get_partial_agent_metadata, slot.block.reg).hex()
        except BaseException:
            arena.give_back(slot)
            raise
        description = {"peer": self.name, "address": list(self.address), "slot": slot.address,
                       "nbytes": end + STAMP_BYTES, "mem": arena.mem, "device": arena.device_id,
                       "block": slot.block.base, "metadata": metadata, "tensors": entries, "stamp": [stamp_at, token]}
        return (arena, slot, stamp_at), description

    def withdraw(self, handle):
        """Gives back the slot publish() took: nobody may read that description any more. Its
        stamp is cleared first, so a read of it from now on raises (the slot's next
        publication has a stamp of its own) instead of returning what the slot holds next."""
        arena, slot, stamp_at = handle
        _core.copy(_stamp(0), _stamp_view(arena, slot, stamp_at))
        arena.give_back(slot)

    def read(self, description, *, device="cpu", timeout=None, abort=None, read_only=True):
        """The Tensors a peer published (publish()'s description), READ from its memory and
        unpacked on `device`; read-only where the source was (read_only=False: never, for a
        framework without read-only arrays, to which they are private copies all the same).
        Connects to that peer first where it is not connected yet. Its death raises
        PeerLostError; `abort` (a threading.Event) set from another thread ends the wait
        with ArrayBridgeError."""
        with self._reads_done:
            if self._closed:
                raise ValueError(f"arraybridge.nixl: peer {self.name!r} is closed")
            self._reading += 1
        try:
            return self._read(description, device, timeout, abort, read_only)
        finally:
            with self._reads_done:
                self._reading -= 1
                self._reads_done.notify_all()

    def _read(self, description, device, timeout, abort, read_only):
        name, address, entries, nbytes, remote, (stamp_at, token) = checked_publication(description)
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
                raise PeerLostError(f"arraybridge.nixl: peer {name!r} is gone ({why_lost(link)})") from error
            self._known_remote_blocks.add(key)
        arena = self._arena(device)
        slot = arena.take(nbytes)
        handles, safe = [], True
        try:
            # The whole publication, then its stamp again: a READ may place its bytes in any
            # order (rails, packets), so a stamp read with the data may predate data read
            # after a withdraw; one read once all the data has landed still holding the token
            # proves the slot was not withdrawn (and written again) before then.
            at, _, far_device, far_mem = remote
            for offset, length in ((0, nbytes), (stamp_at, STAMP_BYTES)):  # nbytes holds the stamp: never 0
                local = self._call(self._agent.get_xfer_descs, [(slot.address + offset, length, arena.device_id)],
                                   arena.mem)
                far = self._call(self._agent.get_xfer_descs, [(at + offset, length, far_device)], far_mem)
                try:  # a peer gone since the connection: NIXL raises here, in its words
                    handles.append(self._call(self._agent.initialize_xfer, "READ", local, far, name))
                    posted = self._call(self._agent.transfer, handles[-1])
                except Exception as error:
                    if not _disconnected(error):
                        raise
                    raise PeerLostError(f"arraybridge.nixl: peer {name!r} is gone ({why_lost(link)})") from error
                if posted == "ERR":  # refused: nothing was posted
                    raise ArrayBridgeError(f"arraybridge.nixl: NIXL refused to read {length} bytes from peer "
                                           f"{name!r}", None, "transfer_failed")
                safe = False  # posted: the slot may be written until the READ ends
                self._poll_read(handles[-1], link, length, True, deadline, abort)
                safe = True
            seen = _core.to_device(_stamp_view(arena, slot, stamp_at), "cpu")  # host memory: a view, no copy
            if any(word != token for word in memoryview(seen).tolist()):
                raise ArrayBridgeError(f"arraybridge.nixl: peer {name!r} withdrew that publication (its memory now "
                                       "holds something else, or nothing): read a description it still publishes",
                                       None, "withdrawn")
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
            for handle in handles:
                try:
                    self._call(self._agent.release_xfer_handle, handle)
                except Exception:  # a READ still under way on a lost peer: the slot is kept out of use
                    safe = False
            if safe:
                arena.give_back(slot)

    def _poll_read(self, handle, link, nbytes, block, deadline, abort=None):
        """Whether the READ of `handle` has completed; with `block`, waits until it has.
        PeerLostError when its peer goes, ArrayBridgeError when NIXL fails it or `abort`
        (a threading.Event) is set, TimeoutError past the deadline."""
        polls, failure = 0, None
        while True:
            try:
                state = self._call(self._agent.check_xfer_state, handle)
            except Exception as error:  # NIXL raises some failures (a remote that disconnected)
                state, failure = "ERR", error
            if state == "DONE":
                return True
            if self._closed:  # close() waits for reads under way: this one ends now, its slot kept
                raise ValueError(f"arraybridge.nixl: peer {self.name!r} is closed")
            link.pump(1.0 if state == "ERR" else 0)  # a failed READ: is the peer gone? its socket says
            if link.lost is not None or (state == "ERR" and _disconnected(failure)):
                raise PeerLostError(f"arraybridge.nixl: peer {link.name!r} is gone ({why_lost(link)}) while "
                                    f"reading {nbytes} bytes from it")
            if state == "ERR":
                raise ArrayBridgeError(f"arraybridge.nixl: NIXL failed reading {nbytes} bytes from peer "
                                       f"{link.name!r}", None, "transfer_failed")
            if abort is not None and abort.is_set():
                raise ArrayBridgeError(f"arraybridge.nixl: reading {nbytes} bytes from peer {link.name!r} was "
                                       "aborted", None, "aborted")
            if not block:
                return False
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
        with self._reads_done:
            if self._closed:
                return
            self._closed = True
            # read() calls under way end at their next poll (a READ still landing keeps its slot).
            self._reads_done.wait_for(lambda: self._reading == 0, timeout=self.timeout)
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
            if arena.slots_in_use == 0:  # else kept: a READ (a read's or a recv's) may still land in it
                arena.release()
        self._links.clear()
        self._agent = _ClosedAgent(self.name)


class _ClosedAgent:
    """A closed peer's agent: any use, by a call racing close() too, says the peer is closed."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attribute):
        raise ValueError(f"arraybridge.nixl: peer {self._name!r} is closed")


def _stamp(token):
    """A publication's stamp (STAMP_BYTES): its token twice, after its data."""
    import numpy as np  # as the arena's views: NIXL's own Python API needs NumPy
    return np.array([token, token], np.uint64)


def _stamp_view(arena, slot, at):
    return arena.view(slot, "uint64", (2,), at)


def _disconnected(error):
    """Whether a NIXL exception says the remote agent disconnected (NIXL_ERR_REMOTE_DISCONNECT)."""
    return error is not None and ("RemoteDisconnect" in type(error).__name__ or "REMOTE_DISCONNECT" in str(error))

