import contextlib
import ctypes
import functools
import importlib
import os
import pathlib
import re
import sys

import numpy as np
import pytest

import arraybridge as ab

def pytest_configure(config):
    config.addinivalue_line("markers", "slow: over a few seconds each (TensorFlow started afresh, NIXL's largest "
                            "payloads): tests/suites.txt runs them in the full tier (python-slow), not in make check")
    keep_out_beside_jax(config)


SLOW_MODULE = re.compile(r"^pytestmark = .*pytest\.mark\.slow|^ +pytest\.mark\.slow\]", re.M)
ONE_SHARD_MODULE = re.compile(r"^ONE_SHARD = True", re.M)
JAX_MODULE = re.compile(r"^(import jax|from jax|\w+ = pytest\.importorskip\(\"jax\"|pytest\.importorskip\(\"jax\")", re.M)
HERE = pathlib.Path(__file__).parent


def uses(name):
    """A module that imports framework `name` (at its top, or as a test's importorskip)."""
    return re.compile(rf"^(import|from) {name}\b|importorskip\(\"{name}\"", re.M)


def quick_tier(config):
    return config.getoption("markexpr") == "not slow"


def current_shard():
    """(k, N) from ARRAYBRIDGE_TEST_SHARD=k/N (tests/python/shards.py), or None."""
    shard = os.environ.get("ARRAYBRIDGE_TEST_SHARD")
    return tuple(int(part) for part in shard.split("/")) if shard else None


def left_out_beside_jax():
    """The frameworks ARRAYBRIDGE_JAX_SHARD_WITHOUT="torch,..." keeps out of the shard with
    JAX's modules (tests/suites.txt sets it for memcheck, where importing torch costs over
    six minutes and JAX three: each shard pays for one)."""
    return tuple(name for name in os.environ.get("ARRAYBRIDGE_JAX_SHARD_WITHOUT", "").split(",") if name)


@functools.cache
def whole_modules(n, quick):
    """Module path -> the one shard of N that collects it. Each module that sets
    ONE_SHARD = True (one Ray cluster for the module) goes whole to a shard of its own,
    and the modules that import JAX at their top all go to one: importing JAX costs
    minutes under memcheck, so only one shard pays it. The other modules that use a
    framework left out beside JAX go together to another. They spread from the last shard."""
    texts = {path: path.read_text() for path in sorted(HERE.glob("test_*.py"))}
    if quick:  # -m "not slow": the slow modules are not collected at all
        texts = {path: text for path, text in texts.items() if not SLOW_MODULE.search(text)}
    groups = [[path] for path, text in texts.items() if ONE_SHARD_MODULE.search(text)]
    placed = {path for group in groups for path in group}
    groups.append([path for path, text in texts.items() if path not in placed and JAX_MODULE.search(text)])
    placed.update(groups[-1])
    if left_out_beside_jax():
        groups.append([path for path, text in texts.items() if path not in placed
                       and any(uses(name).search(text) for name in left_out_beside_jax())])
    return {path: n - 1 - i % n for i, group in enumerate(groups) for path in group}


def jax_shard(n, quick):
    """The shard of N that collects JAX's modules."""
    return next((shard for path, shard in whole_modules(n, quick).items() if JAX_MODULE.search(path.read_text())), None)


def keep_out_beside_jax(config):
    """In the shard with JAX's modules, the frameworks left out beside JAX cannot be
    imported (None in sys.modules): their tests there skip, saying so, and the conversion
    law leaves them out of its draws. Their own modules run in another shard."""
    shard = current_shard()
    if shard and left_out_beside_jax() and shard[0] == jax_shard(shard[1], quick_tier(config)):
        for name in left_out_beside_jax():
            if sys.modules.get(name) is not None:
                raise pytest.UsageError(f"ARRAYBRIDGE_JAX_SHARD_WITHOUT: {name} was imported before the tests started")
            sys.modules[name] = None


def pytest_ignore_collect(collection_path, config):
    """A module is not even imported where none of its tests would run: with -m "not
    slow", a module whose every test is slow (its pytestmark says so), since importing
    Ray only to deselect its tests cost memcheck minutes; in a shard, a whole module
    another shard collects."""
    if collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    if quick_tier(config) and SLOW_MODULE.search(collection_path.read_text()):
        return True
    shard = current_shard()
    if shard and whole_modules(shard[1], quick_tier(config)).get(collection_path.resolve(), shard[0]) != shard[0]:
        return True
    return None


def shard_weights(n):
    """How many of each run of the shared tests each shard takes, from
    ARRAYBRIDGE_SHARD_WEIGHTS="w0,w1,..." (tests/suites.txt sets it where the whole
    modules weigh unevenly), else one each."""
    text = os.environ.get("ARRAYBRIDGE_SHARD_WEIGHTS")
    weights = [int(w) for w in text.split(",")] if text else [1] * n
    if len(weights) != n or min(weights) < 0 or not any(weights):
        raise pytest.UsageError(f"ARRAYBRIDGE_SHARD_WEIGHTS={text!r}: give {n} weights, none negative, not all 0")
    return weights


def pytest_collection_modifyitems(config, items):
    """In shard k of N, its share of the tests of the modules all shards collect (the
    whole modules of whole_modules are this shard's already), by shard_weights: of each
    run of shared tests, shard 0 takes the first w0, shard 1 the next w1, and so on."""
    shard = current_shard()
    if not shard:
        return
    k, n = shard
    whole = whole_modules(n, quick_tier(config))
    takers = [s for s, weight in enumerate(shard_weights(n)) for _ in range(weight)]
    index, kept, dropped = 0, [], []
    for item in items:
        if item.path.resolve() in whole:
            at = k
        else:
            at, index = takers[index % len(takers)], index + 1
        (kept if at == k else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_terminal_summary(terminalreporter):
    """A shard names the frameworks it imported: each costs minutes under memcheck."""
    if current_shard():
        names = ("torch", "jax", "tensorflow", "ray", "pyclesperanto")
        loaded = [name for name in names if sys.modules.get(name) is not None]
        kept_out = [name for name in names if name in sys.modules and sys.modules[name] is None]
        terminalreporter.write_line(f"frameworks imported in this shard: {', '.join(loaded) or 'none'}"
                                    + (f"; kept out: {', '.join(kept_out)}" if kept_out else ""))


DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]
DEVICES = ["cpu", "opencl:0"]


def threads_convert_their_own_values(big_bytes, rounds, threads=8):
    """Issue 17's H100 scenario: a large pageable round trip through cuda:0 (it leaves
    pinned blocks in the pool), then `threads` threads at once convert a transposed
    65x64 int64 array of their own value to cuda:0 and back, `rounds` times each.
    Raises AssertionError naming the conversions that came back with others' values."""
    import threading
    big = np.arange(big_bytes // 4, dtype=np.int32)
    np.testing.assert_array_equal(np.from_dlpack(ab.to_device(ab.to_device(big, "cuda:0"), "cpu")), big)
    del big
    barrier = threading.Barrier(threads)
    wrong, errors = [], []

    def convert(k):
        x = np.full((65, 64), (k + 1) * 1000, dtype=np.int64).T
        barrier.wait()
        try:
            for _ in range(rounds):
                back = np.from_dlpack(ab.to_device(ab.to_device(x, "cuda:0"), "cpu"))
                if not (back == (k + 1) * 1000).all():
                    wrong.append((k, int(back.flat[0])))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    workers = [threading.Thread(target=convert, args=(k,)) for k in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert not errors, errors
    assert not wrong, f"{len(wrong)} of {threads * rounds} conversions got another thread's values: {wrong[:4]}"


def sample(dtype, shape=(4, 6), seed=0):
    """Distinct, dtype-exact values (so a wrong element or byte order shows)."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dtype == "bool":
        return (rng.integers(0, 2, n) == 1).reshape(shape)
    if dtype.startswith("complex"):
        return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype).reshape(shape)
    if dtype.startswith("float"):
        return rng.standard_normal(n).astype(dtype).reshape(shape)
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True).reshape(shape)


def views(base):
    """The layouts DLPack consumers get wrong: negative, zero and non-compact strides, offsets, 0-d and empty."""
    cube = np.resize(base.reshape(-1), (2, 3, 4))
    return {
        "contiguous": base,
        "0-d": np.array(base.reshape(-1)[3]),
        "zero-size": base[:0],
        "transposed": base.T,
        "sliced": base[1:, ::2],
        "negative-stride": base[::-1, ::-1],
        "size-1": base.reshape(1, base.shape[0], 1, base.shape[1]),
        "offset": base.reshape(-1)[5:17],
        "permuted-3d": np.moveaxis(cube, 0, 2),
    }


def data_pointer(array):
    return array.__array_interface__["data"][0]


_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
_GetPointer.restype = ctypes.c_void_p
_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def capsule_flags(capsule):
    """DLManagedTensorVersioned.flags of an unconsumed versioned capsule (offset 24)."""
    address = _GetPointer(capsule, b"dltensor_versioned")
    return ctypes.c_uint64.from_address(address + 24).value


def cuda_reason():
    for backend in ab.backends():
        if backend.name == "cuda" and not (backend.available and backend.device_count):
            return backend.detail or "no CUDA device"
    return None


requires_cuda = pytest.mark.skipif(cuda_reason() is not None, reason=f"needs a CUDA device: {cuda_reason()}")


@contextlib.contextmanager
def jax_x64(enabled):
    """jax_enable_x64 set for a block, then put back (other tests turn it on for the process)."""
    jax = importlib.import_module("jax")
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", enabled)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", before)
