"""arraybridge.ray on a real GPU (issue 63): CuPy, JAX and torch arrays on cuda:0 go
between two actors sharing one GPU by CUDA IPC, every kind exact (strided, 0-d, empty,
bool, complex, read-only, bfloat16 where the framework has it), and a sender's copies
go when Ray collects the object. The fake driver's run of the same path is in
test_ray.py; the timings beside Ray's own NIXL transport and object store are the
bench's `py ray cuda` rows. Skipped without an NVIDIA GPU, which CI never has."""
import importlib.util
import os
import sys
import time

import pytest

pytest.importorskip("ray", reason="ray is installed by `make test` (dev/requirements-test.txt); run it through make")
if not os.path.exists("/proc/driver/nvidia/version"):
    pytest.skip("needs an NVIDIA GPU: issue 63's GPU rows run on a lent GPU machine (dev/gpu_kit.sh pack-ray)",
                allow_module_level=True)
import ray  # noqa: E402

pytestmark = pytest.mark.slow

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 120
ENV_VARS = {"PYTHONPATH": HERE + os.pathsep + os.environ.get("PYTHONPATH", ""), "UCX_MODULES": "^ib",
            "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}  # two JAX processes on one GPU


@pytest.fixture(scope="module")
def gpu_actors():
    sys.path.insert(0, HERE)
    ray.init(num_cpus=4, num_gpus=1, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": ENV_VARS})
    import ray_gpu_actors
    yield ray_gpu_actors
    ray.shutdown()


@pytest.mark.parametrize("framework", ["torch", "cupy", "jax"])
def test_gpu_arrays_arrive_exact_on_cuda0_by_ipc(gpu_actors, framework):
    if importlib.util.find_spec(framework) is None:
        pytest.skip(f"{framework} is not installed here")
    sender, receiver = gpu_actors.Sender.remote(), gpu_actors.Receiver.remote(framework)
    ref = getattr(sender, framework).remote(gpu_actors.kinds_of(framework))
    assert ray.get(receiver.check.remote(framework, ref), timeout=TIMEOUT) == []
    stats = ray.get(receiver.stats.remote())
    assert stats["ipc_reads"] == 1 and stats.get("receives", 0) == 0, stats  # by IPC, nothing over NIXL
    object_id = ref.hex()
    del ref
    deadline = time.monotonic() + 30
    while ray.get(sender.holds.remote(object_id)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not ray.get(sender.holds.remote(object_id)), "the sender kept its copies after Ray collected the object"
    ray.kill(sender)
    ray.kill(receiver)
