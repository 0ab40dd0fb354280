"""The runtime's pinned host pool: statistics and trim."""
from ._lib import ffi, lib
from ._runtime import check, runtime

_FIELDS = ("bytes_pinned", "bytes_in_use", "bytes_cached", "bytes_waiting", "peak_bytes_pinned", "limit_bytes",
           "blocks_pinned", "hits", "misses")


def pool_stats():
    """A dict of the pinned pool's statistics (bytes pinned, in use, cached, peak, hits, misses, ...)."""
    stats = ffi.new("abr_pool_stats*")
    check(lib.abr_pool_get_stats(runtime(), stats), "reading pool statistics")
    return {name: getattr(stats, name) for name in _FIELDS}


def pool_trim():
    """Free every cached pinned block no stream is using; returns the bytes released."""
    released = ffi.new("uint64_t*")
    check(lib.abr_pool_trim(runtime(), released), "trimming the pool")
    return released[0]
