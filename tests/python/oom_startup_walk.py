"""Python's memory running out while arraybridge starts up, run as its own process by
test_out_of_memory.py (oom_walk.py walks the calls once the package is up):

  python oom_startup_walk.py init cold|warm START
      The hot path's installation (abr_python_core_install in the native module: its
      types, the interned names, the exchange capsule, the module arraybridge._core),
      again and again in one process, with every allocation from the nth on failing
      (cold) or the nth alone (warm), for n = START, START+1, ... until one succeeds:
      it is installed until its first success only, so a warm walk takes a process
      for each success (test_out_of_memory.py runs them). Every failure must be MemoryError, and each
      attempt starts from what the failed ones left behind. Then the package imports
      on the module that succeeded and must move values exactly. Prints
      "init MODE START: F failures; succeeded at N", and " (past the last)" when
      allocation N + 1 was never asked for (the walk is over).

  python oom_startup_walk.py setup
      _core.setup, which registers the package's hooks, with the nth allocation
      failing for every n the call makes (warm), then from the nth on (cold). The
      hooks it is given raise when used: every failure must be MemoryError with the
      package's own hooks still in place, and nothing the call does may swallow a
      failure, so a call succeeds only once its allocations are all granted. Prints
      "setup: N allocations, F failures".

A whole `import arraybridge` is not walked: CPython 3.11 crashes by itself when an
allocation fails inside namedtuple's or enum's code (a loop over both, nothing else
imported, ends in SIGSEGV).
"""
import _imp
import glob
import importlib.util
import os
import sys

import numpy as np

try:
    import _testcapi  # CPython's test helpers; test_out_of_memory.py skips without them
except ImportError:
    _testcapi = None

_SPARE = list(range(1 << 16))  # ints made beforehand: counting through them allocates nothing


def attempt(call, start, stop):
    """call() with allocations start+1..stop failing (stop 0: all from start+1):
    (result, error, reached), reached False when allocation start+1 came after the
    call, asked for by the object() after it (one allocation each, no free list)."""
    result = error = None
    reached = True
    _testcapi.set_nomemory(start, stop)
    try:
        result = call()
        try:
            for _ in _SPARE[:start + 1]:
                object()
        except MemoryError:
            reached = False
    except BaseException as e:  # noqa: BLE001 - judged by the caller, outside the failing window
        error = e
    finally:
        _testcapi.remove_mem_hooks()
    if error is not None:
        error.__traceback__ = None  # its frames would hold what the call was given
    return result, error, reached


def moves_values(ab):
    """The package transfers exactly, through its structure and error hooks too."""
    x = np.arange(12.0).reshape(3, 4)
    out = ab.to_device([x, {"w": x.T}], "cpu", copy=True)
    assert np.array_equal(np.from_dlpack(out[0]), x) and np.array_equal(np.from_dlpack(out[1]["w"]), x.T)
    assert np.array_equal(np.from_dlpack(ab.to_device(ab.to_device(x, "opencl:0"), "cpu")), x)
    try:
        ab.to_device(x, "cpu", dtype="float32", copy=False)
        raise AssertionError("a cast without a copy was allowed")
    except ab.CopyRequiredError:  # made by the package's error hook
        pass


def walk_init(mode, start):
    root = os.path.dirname(importlib.util.find_spec("arraybridge").origin)  # finds, imports nothing
    # The package's native module, loaded as the package would, not walked: it makes
    # arraybridge._core when asked (abr_python_core_install), and that is walked.
    spec = importlib.util.spec_from_file_location("arraybridge._native", glob.glob(os.path.join(root, "_native*.so"))[0])
    native = _imp.create_dynamic(spec)
    message = native.ffi.new("char[]", 512)

    def install():
        status = native.lib.abr_python_core_install(message, 512)
        if status:
            raise (MemoryError if status == 1 else ImportError)(native.ffi.string(message).decode())
        return sys.modules["arraybridge._core"]

    failures = 0
    for n in range(start, start + 100000):
        module, error, reached = attempt(install, n, 0 if mode == "cold" else n + 1)
        if error is None:
            break
        assert isinstance(error, MemoryError), f"init {mode}: allocation {n + 1} failing gave {error!r}"
        failures += 1
    import arraybridge as ab
    assert sys.modules["arraybridge._core"].TensorBase is module.TensorBase, "the package did not take the module"
    moves_values(ab)
    print(f"init {mode} {start}: {failures} failures; succeeded at {n}" + ("" if reached else " (past the last)"))


def walk_setup():
    import arraybridge as ab
    from arraybridge import _core, _transfer

    def broken(*args, **kwargs):
        raise AssertionError("a hook of a failed setup() was installed")

    hooks = {name: broken if name not in ("tensor_type", "logger", "runtime_flags", "read_only_why") else value
             for name, value in _transfer._SETUP.items()}
    allocations = failures = 0
    for mode in ("warm", "cold"):
        for n in range(100000):
            _, error, reached = attempt(lambda: _core.setup(**hooks), n, n + 1 if mode == "warm" else 0)
            if error is None:
                _core.setup(**_transfer._SETUP)  # the package's own again
                assert not reached, f"setup {mode}: allocation {n + 1} failed and the call still succeeded"
                allocations = allocations or n
                break
            assert isinstance(error, MemoryError), f"setup {mode}: allocation {n + 1} failing gave {error!r}"
            failures += 1
            moves_values(ab)
    assert allocations > 0, "setup made no allocation to refuse"
    print(f"setup: {allocations} allocations, {failures} failures")


if __name__ == "__main__":
    if sys.argv[1] == "init":
        walk_init(sys.argv[2], int(sys.argv[3]))
    else:
        walk_setup()
