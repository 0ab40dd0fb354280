"""The runtime's pinned host pool: statistics and trim, and how staged transfers use it."""
from ._lib import ffi, lib
from ._runtime import check, runtime

_FIELDS = ("bytes_pinned", "bytes_in_use", "bytes_cached", "bytes_waiting", "peak_bytes_pinned", "limit_bytes",
           "blocks_pinned", "hits", "misses")


def pool_stats():
    """A dict of the pinned pool's statistics (bytes pinned, in use, cached, peak, hits, misses, ...)."""
    stats = ffi.new("abr_pool_stats*", {"version": lib.ABR_POOL_STATS_VERSION})
    check(lib.abr_pool_get_stats(runtime(), stats), "reading pool statistics")
    return {name: getattr(stats, name) for name in _FIELDS}


def pool_trim():
    """Free every cached pinned block no stream is using; returns the bytes released."""
    released = ffi.new("uint64_t*")
    check(lib.abr_pool_trim(runtime(), released), "trimming the pool")
    return released[0]


def set_staging(threads=0, chunk_bytes=0):
    """How staged transfers planned from now on are cut: host threads per chunk (1..256)
    and chunk size in bytes (64 KiB..1 GiB); 0 keeps the default (or the environment's
    ARRAYBRIDGE_STAGING_THREADS / ARRAYBRIDGE_STAGING_CHUNK_MIB). A transfer's report
    states the shape it ran with."""
    if not (isinstance(threads, int) and isinstance(chunk_bytes, int)) or threads < 0 or chunk_bytes < 0:
        raise TypeError(f"set_staging takes two whole numbers >= 0, not threads={threads!r}, "
                        f"chunk_bytes={chunk_bytes!r}")
    check(lib.abr_runtime_set_staging(runtime(), threads, chunk_bytes), "setting the staging shape")
