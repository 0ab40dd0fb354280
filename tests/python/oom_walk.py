"""Python's memory running out at each allocation of one arraybridge call, run as its
own process by test_out_of_memory.py: `python oom_walk.py SCENARIO`.

CPython's _testcapi.set_nomemory(start, stop) makes every Python allocation (objects,
PyMem, raw) from number start+1 to stop fail. The walk runs the scenario's call:
  1. cold, in this fresh process (the package's first-call set-up walked too; the
     runtime is made before, by the statistics read around each call), with every
     allocation from the nth on failing, n = 0, 1, ... until the call succeeds:
     memory that stays exhausted (WARM_ONLY calls skip this);
  2. warm, with only the nth failing, for each of the N allocations the call makes
     (allocations_of counts them): one allocation refused, the rest granted.
Each failure must be MemoryError (or torch's own error from torch.from_dlpack), hand
back nothing, and leave the reference count of every source object (nested ones too)
and the pinned pool's and the device cache's bytes in use as they were; each success
must have the source's values. Then the warm walk runs REPEATS more times, and
Python's allocated blocks must grow by under REPEATS // 2 (an object kept by the
failure of any one allocation would grow them by REPEATS). A crash fails the parent's
test. Prints one line: "<scenario>: N allocations, F failures; G blocks grown over
R more walks".
"""
import gc
import sys

import numpy as np

import arraybridge as ab

try:
    import _testcapi  # CPython's test helpers; test_out_of_memory.py skips without them
except ImportError:
    _testcapi = None


def values(result):
    """A result's values as a NumPy array (a structure: a list of them, flattened)."""
    if isinstance(result, dict):
        return [v for key in sorted(result) for v in values(result[key])]
    if isinstance(result, (list, tuple)):
        return [v for item in result for v in values(item)]
    if isinstance(result, np.ndarray):
        return [result.copy()]
    if result is None:
        return []
    return [np.from_dlpack(ab.to_device(result, "cpu", copy=True))]


def flattened(structure):
    """Every object of a structure of lists, tuples and dicts, the containers too."""
    found = []
    for item in structure.values() if isinstance(structure, dict) else structure:
        found.append(item)
        if isinstance(item, (list, tuple, dict)):
            found += flattened(item)
    return found


def cuda_tensor(x):
    return ab.to_device(x, "cuda:0")


def waited(t):
    """t (a Tensor, or the Event of a non-blocking copy; None: done) once its work is done."""
    if t is not None:
        t.wait()
    return t


def untraced(error):
    """The error without its tracebacks, whose frames would hold the call's arguments."""
    seen = error
    while seen is not None:
        seen.__traceback__ = None
        seen = seen.__cause__ or seen.__context__
    return error


# convert_memory (enum lookups, except clauses of ours), a structure's to_device and copy
# (the except clause that names a failure's place) and torch.from_dlpack (torch's
# Python code) run Python where CPython 3.11 itself loops for ever once memory stays
# exhausted (an except clause that cannot allocate its exception's traceback): their
# walks run warm only. (A structure's cold walk passed only while every allocation it
# could fail came before its try: interning host_staging=, a name new to the process,
# moved one inside.)
WARM_ONLY = {"convert_memory numpy to numpy", "convert_memory of a dict", "export to torch", "dict to cpu",
             "copy of a dict"}


def scenarios(with_torch=True):
    """name -> (make: () -> args, call: (*args) -> result); torch's too when it is
    installed and asked for (its import takes seconds)."""
    x = np.arange(1024, dtype=np.float32).reshape(32, 32)
    xs = [np.full(256, i, dtype=np.float32) for i in range(8)]
    table = {
        "to_device cpu copy": (lambda: (x,), lambda a: ab.to_device(a, "cpu", copy=True)),
        "to_device cpu strided, cast": (lambda: (x.T,), lambda a: ab.to_device(a, "cpu", dtype="float64")),
        "to_device opencl": (lambda: (x,), lambda a: ab.to_device(a, "opencl:0")),
        "to_device cuda": (lambda: (x,), lambda a: ab.to_device(a, "cuda:0")),
        "cuda to cpu": (lambda: (cuda_tensor(x),), lambda a: ab.to_device(a, "cpu")),
        "cuda to cpu, non_blocking": (lambda: (cuda_tensor(x),),
                                      lambda a: waited(ab.to_device(a, "cpu", non_blocking=True))),
        "to_device cuda on a stream, non_blocking": (lambda: (x,),
                                                     lambda a: ab.to_device(a, "cuda:0", stream=1, non_blocking=True)),
        "list to cuda": (lambda: (xs,), lambda a: ab.to_device(a, "cuda:0")),
        "dict to cpu": (lambda: ({"w": x, "b": [xs[0], (xs[1],)]},), lambda a: ab.to_device(a, "cpu", copy=True)),
        "to_device_many opencl": (lambda: (xs,), lambda a: ab.to_device_many(a, "opencl:0")),
        "copy": (lambda: (x, np.zeros_like(x)), lambda a, b: ab.copy(a, b)),
        "copy into cuda": (lambda: (x, cuda_tensor(np.zeros_like(x))), lambda a, b: ab.copy(a, b)),
        "copy of a dict": (lambda: ({"w": x, "b": [xs[0]]}, {"w": np.zeros_like(x), "b": [np.zeros_like(xs[0])]}),
                           lambda a, b: ab.copy(a, b)),
        "copy_many": (lambda: (xs, [np.zeros_like(v) for v in xs]), lambda a, b: ab.copy_many(a, b)),
        "to_device cuda, cast": (lambda: (x,), lambda a: ab.to_device(a, "cuda:0", dtype="float64")),
        "opencl to cuda": (lambda: (ab.to_device(x, "opencl:0"),), lambda a: ab.to_device(a, "cuda:0")),
        "copy into cuda, non_blocking": (lambda: (x, cuda_tensor(np.zeros_like(x))),
                                         lambda a, b: waited(ab.copy(a, b, non_blocking=True))),
        "a batch with a Tensor's capsule, non_blocking": (
            lambda: ([cuda_tensor(x), cuda_tensor(xs[0])],),
            lambda a: [waited(t) for t in ab.to_device_many([a[0].__dlpack__(max_version=(1, 0)), a[1]], "cpu",
                                                            non_blocking=True)]),
        "from_dlpack": (lambda: (x,), lambda a: ab.from_dlpack(a)),
        "from_dlpack of a legacy capsule": (lambda: (x,), lambda a: ab.from_dlpack(a.__dlpack__())),
        "from_dlpack of a Tensor's capsule": (lambda: (ab.to_device(x, "cpu", copy=True),),
                                              lambda a: ab.from_dlpack(a.__dlpack__())),
        "cuda Tensor's capsule on a stream": (lambda: (cuda_tensor(x),), lambda a: ab.from_dlpack(a.__dlpack__(stream=1))),
        "ipc handle and open": (lambda: (cuda_tensor(x),), lambda a: ab.from_ipc(ab.ipc_handle(a))),
        "devices": (lambda: (x,), lambda a: ab.devices()),
        "export to numpy": (lambda: (ab.to_device(x, "cpu", copy=True),), lambda a: np.from_dlpack(a)),
        "convert_memory numpy to numpy": (lambda: (x,), lambda a: ab.convert.convert_memory(a, "numpy", "numpy", None)),
        "convert_memory of a dict": (lambda: ({"w": x, "b": [xs[0]]},),
                                     lambda a: ab.convert.convert_memory(a, "numpy", "numpy", None)),
    }
    if not with_torch:
        return table
    try:
        import torch
    except ImportError:
        return table
    tx = torch.arange(1024, dtype=torch.float32)
    table["torch to cpu copy"] = (lambda: (tx,), lambda a: ab.to_device(a, "cpu", copy=True))
    table["export to torch"] = (lambda: (ab.to_device(x, "cpu", copy=True),), lambda a: torch.from_dlpack(a))
    return table


def settled_in_use():
    """Pinned and device bytes lent out, once released memory is back (pool_trim waits
    for it, and empties the caches: every run starts from the same state)."""
    ab.pool_trim()
    return ab.pool_stats()["bytes_in_use"], ab.device_cache_stats()["bytes_in_use"]


def attempt(call, args, start, stop):
    """The call with allocations start+1..stop failing (stop 0: all from start+1):
    (result, error). A local function: nothing here allocates in the window."""
    result = error = None
    _testcapi.set_nomemory(start, stop)
    try:
        result = call(*args)
    except BaseException as e:  # noqa: BLE001 - judged below, outside the failing window
        error = untraced(e)
    finally:
        _testcapi.remove_mem_hooks()
    return result, error


_SPARE = list(range(1 << 16))  # ints made beforehand: counting through them allocates nothing


def allocations_of(call, args):
    """How many allocations the call makes: allocation 2^16 + 1 from its start fails,
    and after the call one object() a step (an allocation each, no free list) counts
    how many were left; the same without the call calibrates the count."""
    def left_after(fn):
        settled_in_use()
        last = -1
        _testcapi.set_nomemory(len(_SPARE) - 1, len(_SPARE))
        try:
            fn()
            for last in _SPARE:
                object()
        except MemoryError:
            pass
        finally:
            _testcapi.remove_mem_hooks()
        return last

    made = left_after(lambda: call(*args))
    assert made >= 0, "the call made more allocations than the walk counts"
    return left_after(lambda: None) - made


def torch_refused(error):
    """torch.from_dlpack's own error when an allocation inside torch fails: its
    OutOfMemoryError, or (torch 2.11, seen on the GPU machine 2026-11-29) the
    RuntimeError of its Tensor object's allocation."""
    if type(error).__module__ == "torch" and type(error).__name__ == "OutOfMemoryError":
        return True
    return type(error) is RuntimeError and str(error) == "Failed to allocate a Tensor object"


def one_run(name, make, call, start, stop):
    """One attempt, judged; True when it failed (cleanly)."""
    args = make()
    expected = values(args[0])
    leaves = flattened(args)
    refs = [sys.getrefcount(leaf) for leaf in leaves]
    before = settled_in_use()
    result, error = attempt(call, args, start, stop)
    if error is None:
        if name == "devices":
            assert [d.name for d in result] == DEVICES, f"{name}: {result} at {start}"
            return False
        got = values(args[1]) if name.startswith("copy") else values(result)
        assert len(got) == len(expected) and all(
            np.array_equal(g, e.astype(g.dtype)) for g, e in zip(got, expected)), f"{name}: wrong values at {start}"
        return False
    assert isinstance(error, MemoryError) or torch_refused(error), \
        f"{name}: allocation {start + 1} failing gave {error!r}"
    assert result is None
    del error
    assert [sys.getrefcount(leaf) for leaf in leaves] == refs, f"{name}: a source's references changed at {start}"
    assert settled_in_use() == before, f"{name}: memory held after allocation {start + 1} failed"
    return True


# The warm walk again REPEATS times: an object kept by the failure of any one
# allocation grows Python's blocks by REPEATS; a block or two is the walk's own.
REPEATS = 8
DEVICES = None


def main(name):
    global DEVICES
    DEVICES = [d.name for d in ab.devices()]
    make, call = scenarios(with_torch="torch" in name)[name]
    failures = 0
    if name not in WARM_ONLY:
        for n in range(100000):  # 1. cold, memory exhausted from the nth allocation on
            if not one_run(name, make, call, n, 0):
                break
            failures += 1
    allocations = allocations_of(call, make())

    def warm_walk():
        failed = 0
        for n in range(allocations):  # 2. warm, the nth alone refused
            failed += one_run(name, make, call, n, n + 1)
        return failed

    warm = warm_walk()
    assert warm > 0, f"{name}: no allocation failed warm"
    failures += warm
    gc.collect()
    blocks = sys.getallocatedblocks()
    assert blocks > 0, "Python's own allocator is off (PYTHONMALLOC=malloc): its blocks cannot be counted"
    for _ in range(REPEATS):
        warm_walk()
    gc.collect()
    grown = sys.getallocatedblocks() - blocks
    print(f"{name}: {allocations} allocations, {failures} failures; {grown} blocks grown over {REPEATS} more walks",
          flush=True)
    assert grown < REPEATS // 2, f"{name}: {grown} blocks grew over {REPEATS} walks"


if __name__ == "__main__":
    main(sys.argv[1])
