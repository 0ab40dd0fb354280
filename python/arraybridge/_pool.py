"""The runtime's pinned host pool and device memory cache: statistics, trim and limits, and how
staged transfers use the pool."""
import operator

from ._lib import _core

_FIELDS = ("bytes_pinned", "bytes_in_use", "bytes_cached", "bytes_waiting", "peak_bytes_pinned", "limit_bytes",
           "blocks_pinned", "hits", "misses")


def pool_stats():
    """A dict of the pinned pool's statistics (bytes pinned, in use, cached, peak, hits, misses, ...)."""
    return dict(zip(_FIELDS, _core.pool_stats()))


def pool_trim():
    """Free every cached pinned block no stream is using, the device cache and the small host buffers kept
    for reuse; returns the bytes of pinned and device memory released."""
    return _core.pool_trim(False)


def device_cache_stats():
    """A dict of the device memory cache's statistics, with pool_stats()'s keys: bytes_pinned is the
    device memory held from the driver (lent to tensors + cached), limit_bytes the most kept cached.
    A deleted CUDA tensor's memory serves the next tensor of its size class without cuMemAlloc."""
    return dict(zip(_FIELDS, _core.device_cache_stats()))


def set_device_cache_limit(limit_bytes):
    """The most device memory kept cached (all CUDA devices together); lower than what is cached
    frees blocks at once; 0 restores the default (1 GiB)."""
    _core.set_device_cache_limit(_whole(limit_bytes, "limit_bytes", "set_device_cache_limit", 2**64 - 1))


def set_staging(threads=0, chunk_bytes=0):
    """How staged transfers planned from now on are cut: host threads per chunk (1..256)
    and chunk size in bytes (64 KiB..1 GiB); 0 keeps the default (or the environment's
    ARRAYBRIDGE_STAGING_THREADS / ARRAYBRIDGE_STAGING_CHUNK_MIB). A transfer's report
    states the shape it ran with."""
    _core.set_staging(_whole(threads, "threads", "set_staging", 256),
                      _whole(chunk_bytes, "chunk_bytes", "set_staging", 2**64 - 1))


def _whole(value, name, call, most):
    """`value`, an integer from 0 to `most` (NumPy's too, whatever operator.index takes;
    never a bool): else a TypeError (not an integer) or ValueError naming it."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{call}: {name} must be an int, not {value!r}")
    value = operator.index(value)
    if not 0 <= value <= most:
        raise ValueError(f"{call}: {name} must be from 0 to {most if most < 2**64 - 1 else '2**64 - 1'}, not {value}")
    return value
