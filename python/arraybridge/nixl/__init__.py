"""arraybridge.nixl: tensors of any framework between processes over NIXL (NVIDIA's
transfer library, UCX underneath). NIXL itself is imported when a Peer is made:
`pip install --no-deps nixl-cu12` (it needs only NumPy).

    from arraybridge import nixl
    nixl.skip_infiniband()   # on a machine without InfiniBand (see skip_infiniband)
    with nixl.Peer("prefill", listen=("0.0.0.0", 5555)) as peer:
        decode = peer.peers(wait_for=1)[0]
        peer.send(kv_cache_view, to=decode).wait()

The package, one idea a file: `_load` (importing NIXL; UCX's modules), `_wire` (the
control connection and the messages on it), `_arena` (memory registered once, cut into
slots), `_peer` (Peer and Transfer, which carry out the moves).
"""
from .._errors import PeerLostError
from ._load import nixl_available, skip_infiniband
from ._peer import Peer, Transfer

__all__ = ["Peer", "PeerLostError", "Transfer", "nixl_available", "skip_infiniband"]
