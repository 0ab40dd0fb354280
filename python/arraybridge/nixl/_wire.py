"""The wire between two NIXL peers: one TCP connection per pair carries the agents'
metadata once (a hello each way), then small JSON messages: an offer (where the packed
bytes of a send are, in the sender's registered memory), done or failed (the slot may be
reused), bye. A publication (Peer.publish) is a description of the same kind handed
over by the caller. The bytes themselves go through NIXL. Everything that arrives is
checked field by field: it came from another process. A peer that disappears closes
its connection, so every wait on it ends with PeerLostError instead of a hang."""
import functools
import json
import math
import selectors
import socket
import struct
import threading
import time

from .._errors import ArrayBridgeError, PeerLostError

FRAME = struct.Struct("!I")
MAX_FRAME = 1 << 24  # a control message is small; a larger length is a broken or foreign peer
STAMP_BYTES = 16  # a publication's stamp after its data: its token twice (what a one-sided READ checks)


def round_up(n, step):
    return (n + step - 1) // step * step


# The dtypes a slot can be viewed as (NumPy, or torch for bfloat16), so sent.
SENDABLE = ("bool", "int8", "uint8", "int16", "uint16", "float16", "bfloat16", "int32", "uint32", "float32", "int64",
            "uint64", "float64", "complex64", "complex128")


@functools.lru_cache(maxsize=None)
def _itemsize(dtype):
    from .._dtype import parse_dtype  # the library's vocabulary: bits and lanes of the name
    _, bits, lanes = parse_dtype(dtype)
    return bits * lanes // 8


def nbytes_of(dtype, shape):
    return _itemsize(dtype) * math.prod(shape)


class Link:
    """The control connection to one remote peer. Whichever thread waits on it reads what
    has arrived (no thread of its own: a hop between threads costs more than the message):
    offers queue up for recv; a send's receipt settles it where it arrives (its slot goes
    back then, whether or not anyone waits for the send); the end of the connection marks
    the link lost, which every waiter then sees, and settles the sends still unanswered."""

    def __init__(self, name, sock):
        self.name, self.sock = name, sock
        self.offers = []
        self.receipts = {}  # send id -> its Receipt, until the receiver answers or the link goes
        self.known_blocks = set()  # id()s of this side's blocks whose registration the remote agent knows
        self.lost = None  # why the link is gone, once it is
        self.send_lock, self.read_lock = threading.Lock(), threading.Lock()
        self.selector = selectors.DefaultSelector()
        self.selector.register(sock, selectors.EVENT_READ)

    def expect(self, ident, arena, slot):
        """The Receipt of send `ident` from `slot` of `arena`, given back once: at its answer, or when the
        link goes."""
        receipt = self.receipts[ident] = Receipt(arena, slot)
        if self.lost is not None:  # gone before it was expected: nothing will answer
            self._settle_all()
        return receipt

    def forget(self, ident):
        """Drops an offer never posted; True when it was still unsettled (its caller settles it)."""
        return self.receipts.pop(ident, None) is not None

    def _lose(self, why):
        self.lost = self.lost or why
        self._settle_all()

    def _settle_all(self):
        while True:  # popitem is atomic: a receipt settles once, whichever thread gets it
            try:
                _, receipt = self.receipts.popitem()
            except KeyError:
                return
            receipt.settle()

    def post(self, message):
        data = json.dumps(message).encode()
        try:
            with self.send_lock:
                self.sock.sendall(FRAME.pack(len(data)) + data)
        except OSError as error:
            self._lose(f"sending to it failed ({error})")
            raise PeerLostError(f"arraybridge.nixl: peer {self.name!r} is gone: {self.lost}") from None

    def pump(self, wait):
        """Reads the messages that arrive within `wait` seconds (0: only those already here)."""
        if self.lost is not None or not self.read_lock.acquire(blocking=False):
            time.sleep(min(wait, 0.001))  # another thread is reading for us
            return
        try:
            while self.lost is None and self.selector.select(wait):
                self._dispatch(read_frame(self.sock))
                wait = 0
        except (OSError, ConnectionError, ValueError) as error:
            self._lose(str(error) or type(error).__name__)
        finally:
            self.read_lock.release()

    def _dispatch(self, message):
        kind = message.get("type")
        if kind == "offer":
            self.offers.append(message)
        elif kind in ("done", "failed"):
            receipt = self.receipts.pop(message.get("id"), None)
            if receipt is not None:
                receipt.answer = message
                receipt.settle()
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
        self._lose("closed here")


class Receipt:
    """A send's answer from its receiver (`answer`: its message, None until one comes), and
    the slot it gives back once the send is over."""
    __slots__ = ("answer", "arena", "slot")

    def __init__(self, arena, slot):
        self.answer, self.arena, self.slot = None, arena, slot

    def settle(self):
        self.arena.give_back(self.slot)


def read_exactly(sock, n):
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ConnectionError("the connection closed")
        chunks += chunk
    return bytes(chunks)


def read_frame(sock):
    (length,) = FRAME.unpack(read_exactly(sock, FRAME.size))
    if length > MAX_FRAME:
        raise ValueError(f"a control message of {length} bytes (at most {MAX_FRAME}): not an arraybridge.nixl peer")
    message = json.loads(read_exactly(sock, length))
    if not isinstance(message, dict):
        raise ValueError("a control message that is not a JSON object: not an arraybridge.nixl peer")
    return message


def why_lost(link):
    return link.lost or "NIXL: the remote agent disconnected"


def tell(link, message):
    try:
        link.post(message)
    except PeerLostError:
        pass  # the sender is gone: nobody is waiting for this


def canonical_dtype(dtype):
    from .._dtype import dtype_name, parse_dtype
    return dtype_name(*parse_dtype(dtype))


def checked_publication(description):
    """(peer, address, entries, nbytes, (address, nbytes, device, mem), (stamp offset, token))
    of a publication, each field checked: it came through another process."""
    try:
        name, address, entries = description["peer"], tuple(description["address"]), description["tensors"]
        nbytes, slot, mem, device = description["nbytes"], description["slot"], description["mem"], description["device"]
        int(description["block"]), bytes.fromhex(description["metadata"])
        stamp_at, token = description["stamp"]
        ends = [e["at"] + nbytes_of(e["dtype"], e["shape"]) for e in entries] + [stamp_at + STAMP_BYTES]
        valid = (isinstance(name, str) and len(address) == 2 and isinstance(nbytes, int) and isinstance(slot, int)
                 and isinstance(device, int) and mem in ("DRAM", "VRAM")
                 and all(e["dtype"] in SENDABLE and all(isinstance(n, int) and n >= 0 for n in e["shape"])
                         and isinstance(e["at"], int) and e["at"] >= 0 and isinstance(e["read_only"], bool)
                         for e in entries)
                 and isinstance(stamp_at, int) and stamp_at >= 0 and isinstance(token, int) and 0 < token < 2**64
                 and all(end <= nbytes for end in ends) and all(end <= stamp_at for end in ends[:-1]))
    except (KeyError, TypeError, ValueError, AttributeError):
        valid = False
    if not valid:
        raise ArrayBridgeError(f"arraybridge.nixl: a malformed publication: {description!r}", None, "malformed_offer")
    return name, address, entries, nbytes, (slot, nbytes, device, mem), (stamp_at, token)


def checked_offer(offer, name):
    """(id, shape, dtype, nbytes, (address, nbytes, device, mem)) from a remote offer, each
    field checked: it came over the network."""
    shape, kind, nbytes = offer.get("shape"), offer.get("dtype"), offer.get("nbytes")
    address, device, mem, ident = offer.get("address"), offer.get("device"), offer.get("mem"), offer.get("id")
    if not (isinstance(shape, list) and all(isinstance(n, int) and n >= 0 for n in shape) and kind in SENDABLE
            and isinstance(nbytes, int) and nbytes == nbytes_of(kind, shape) and isinstance(address, int)
            and isinstance(device, int) and mem in ("DRAM", "VRAM") and isinstance(ident, int)):
        raise ArrayBridgeError(f"arraybridge.nixl: peer {name!r} sent a malformed offer: {offer!r}", None,
                               "malformed_offer")
    return ident, tuple(shape), kind, nbytes, (address, nbytes, device, mem)
