"""arraybridge.nixl: tensors of any framework between processes over NIXL (see
arraybridge.NixlPeer). NIXL itself is imported when a Peer is made:
`pip install --no-deps nixl-cu12` (it needs only NumPy).

    from arraybridge import nixl
    with nixl.Peer("prefill", listen=("0.0.0.0", 5555)) as peer:
        decode = peer.peers(wait_for=1)[0]
        peer.send(kv_cache_view, to=decode).wait()
"""
from ._nixl import NixlPeer as Peer, NixlTransfer as Transfer, PeerLostError, nixl_available

__all__ = ["Peer", "PeerLostError", "Transfer", "nixl_available"]
