"""Python's memory running out at each allocation of an arraybridge call (oom_walk.py,
one fresh interpreter per call so that the package's first-call set-up is walked too)
and of the package's start-up (oom_startup_walk.py): each failure is MemoryError with
nothing handed out, no reference or memory kept, and no crash. CUDA calls run against
the fake driver."""
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parent
BUILD = pathlib.Path(os.environ.get("ARRAYBRIDGE_BUILD", HERE.parents[1] / "build"))
FAKE = BUILD / "fake-cuda" / "libcuda.so.1"

pytestmark = pytest.mark.slow  # every allocation walked, in turn: 35 s here

try:
    import _testcapi
    HOOKS = hasattr(_testcapi, "set_nomemory")
except ImportError:
    HOOKS = False

sys.path.insert(0, str(HERE))
import oom_walk  # noqa: E402

TORCH = importlib.util.find_spec("torch") is not None

SCENARIOS = ["to_device cpu copy", "to_device cpu strided, cast", "to_device opencl", "to_device cuda", "cuda to cpu",
             "cuda to cpu, non_blocking", "to_device cuda on a stream, non_blocking", "list to cuda", "dict to cpu",
             "to_device_many opencl", "to_device cuda, cast", "opencl to cuda", "copy", "copy into cuda",
             "copy into cuda, non_blocking", "a batch with a Tensor's capsule, non_blocking", "copy of a dict", "copy_many", "from_dlpack",
             "from_dlpack of a legacy capsule", "from_dlpack of a Tensor's capsule",
             "cuda Tensor's capsule on a stream", "ipc handle and open", "devices", "export to numpy",
             "convert_memory numpy to numpy", "convert_memory of a dict", "torch to cpu copy", "export to torch"]


def walk(script, *args):
    """The walk's one line of output, from a fresh interpreter; a failure or a crash fails the test."""
    if not FAKE.exists():
        pytest.skip(f"the fake CUDA driver is not built ({FAKE}): run make test")
    env = dict(os.environ, ARRAYBRIDGE_CUDA_LIBRARY=str(FAKE), OPENBLAS_NUM_THREADS="1")
    env.pop("PYTHONMALLOC", None)  # valgrind_native.py's: the walk counts pymalloc's blocks (and runs natively)
    done = subprocess.run([sys.executable, str(HERE / script), *args], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}{done.stderr[-4000:]}"
    return done.stdout


needs_hooks = pytest.mark.skipif(not HOOKS, reason="this Python has no _testcapi.set_nomemory to make "
                                                   "allocations fail")


@needs_hooks
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_allocation_failing_in_turn_is_a_clean_memory_error(scenario):
    if "torch" in scenario and not TORCH:
        pytest.skip("torch is not installed")
    out = walk("oom_walk.py", scenario)
    assert out.startswith(f"{scenario}: "), out


@needs_hooks
def test_the_extension_initialises_after_failures_at_every_allocation():
    assert walk("oom_startup_walk.py", "init", "cold", "0").rstrip().endswith("(past the last)")
    start = 0
    for _ in range(500):  # a process for each allocation whose failure CPython absorbs, then one past the last
        out = walk("oom_startup_walk.py", "init", "warm", str(start))
        if out.rstrip().endswith("(past the last)"):
            failures = int(out.split(": ")[1].split(" failures")[0])
            assert start + failures > 10, f"the warm walk ended at allocation {start + failures + 1}: {out}"
            return
        start = int(out.split("succeeded at ")[1]) + 1
    raise AssertionError(f"the warm walk did not end: {out}")


@needs_hooks
def test_setup_fails_cleanly_at_every_allocation():
    assert walk("oom_startup_walk.py", "setup").startswith("setup: ")


def test_the_walk_knows_every_scenario():
    walked = set(oom_walk.scenarios(with_torch=TORCH))
    assert walked == set(SCENARIOS) if TORCH else walked == {s for s in SCENARIOS if "torch" not in s}


def test_the_walk_takes_torchs_own_refusals_and_no_other_error():
    # torch 2.11 (the GPU machine, 2026-11-29) refuses a failed allocation inside
    # from_dlpack with this RuntimeError, which the walk once judged a failure of ours.
    assert oom_walk.torch_refused(RuntimeError("Failed to allocate a Tensor object"))
    assert not oom_walk.torch_refused(RuntimeError("arraybridge: the copy failed"))
    assert not oom_walk.torch_refused(ValueError("Failed to allocate a Tensor object"))
    torch_oom = type("OutOfMemoryError", (RuntimeError,), {"__module__": "torch"})
    assert oom_walk.torch_refused(torch_oom("CUDA out of memory"))
