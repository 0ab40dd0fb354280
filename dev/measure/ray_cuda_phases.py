# Issue 63's py ray cuda rows taken apart: where one actor-to-actor transfer of a
# framework's cuda:0 array through arraybridge.ray spends its time. The end to end
# time (ours, Ray's object store, an empty array through ours, and a plain method call
# passed on: Ray's own floor), and inside the actors the medians of our pieces: the
# sender's _publish (NIXL publish, its IPC copies, their handles) and the receiver's
# _read_by_ipc (handles opened, copies, closed) and _finish.
#   python ray_cuda_phases.py [FRAMEWORK] [SIZES] [REPS]   (cupy, torch, jax; or
#   arraybridge: our own Tensor, which runs here on the fake driver through
#   ARRAYBRIDGE_CUDA_LIBRARY)
import os, sys, time
import numpy as np
import ray
import arraybridge.ray as abray

framework = sys.argv[1] if len(sys.argv) > 1 else "cupy"
sizes = [int(s) for s in (sys.argv[2] if len(sys.argv) > 2 else "4096,1048576,16777216").split(",")]
reps = int(sys.argv[3]) if len(sys.argv) > 3 else 15
gpu = os.path.exists("/proc/driver/nvidia/version")
env = {k: os.environ[k] for k in ("PYTHONPATH", "ARRAYBRIDGE_CUDA_LIBRARY") if k in os.environ}
env.update(UCX_MODULES="^ib", XLA_PYTHON_CLIENT_PREALLOCATE="false", OPENBLAS_NUM_THREADS="1")
ray.init(num_cpus=2, num_gpus=1 if gpu else 0, include_dashboard=False, log_to_driver=False,
         runtime_env={"env_vars": env})
abray.register([framework])


def instrument():
    """Wraps our pieces in this process so that each call adds its seconds to a log."""
    from arraybridge._lib import _core
    from arraybridge.nixl import _peer
    log = {}
    def wrap(owner, name, label):
        f = getattr(owner, name)
        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                log.setdefault(label, []).append(time.perf_counter() - t)
        setattr(owner, name, timed)
    for name in ("_publish", "_read_by_ipc", "_finish", "_node", "_receiving_device"):
        wrap(abray, name, name)
    for name in ("to_device_many", "ipc_export", "ipc_import", "to_device", "from_dlpack"):
        wrap(_core, name, "_core." + name)
    for name in ("publish", "withdraw"):
        wrap(_peer.Peer, name, "Peer." + name)
    return log


def make(n):
    if framework == "cupy":
        import cupy
        return cupy.ones(n, dtype=cupy.uint8)
    if framework == "torch":
        import torch
        return torch.ones(n, dtype=torch.uint8, device="cuda:0")
    if framework == "jax":
        import jax, jax.numpy as jnp
        return jax.device_put(jnp.ones(n, dtype=jnp.uint8), jax.devices("gpu")[0])
    import arraybridge as ab
    return ab.to_device(np.ones(n, dtype=np.uint8), "cuda:0")


class Sender:
    def __init__(self):
        self.log = instrument()
    def ours(self, n):
        return make(n)
    def store(self, n):
        return make(n)
    def plain(self, n):
        return n
    def take_log(self):
        log = dict(self.log)
        self.log.clear()
        return {k: sorted(v)[len(v) // 2] for k, v in log.items()}


class Receiver:
    def __init__(self):
        self.log = instrument()
        abray.receive_on("cuda:0", framework)
    def take(self, x):
        if framework == "cupy":
            import cupy
            cupy.cuda.runtime.deviceSynchronize()
        elif framework == "torch":
            import torch
            torch.cuda.synchronize()
        elif framework == "jax":
            x.block_until_ready()
        return 1
    take_log = Sender.take_log


Sender.ours = ray.method(tensor_transport=abray.transport(framework))(Sender.ours)
half = {"num_gpus": 0.5 if gpu else 0}
sender = ray.remote(**half)(Sender).remote()
receiver = ray.remote(enable_tensor_transport=True, **half)(Receiver).remote()


def median_ms(fn):
    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[reps // 2] * 1e3


def through(method, n):
    return lambda: ray.get(receiver.take.remote(method.remote(n)), timeout=60)


floor = median_ms(through(sender.plain, 0))
empty = median_ms(through(sender.ours, 0))
print(f"{framework}: a plain call passed on {floor:.2f} ms; an empty array through ours {empty:.2f} ms", flush=True)
for n in sizes:
    ray.get([sender.take_log.remote(), receiver.take_log.remote()])
    ours = median_ms(through(sender.ours, n))
    sent, received = ray.get([sender.take_log.remote(), receiver.take_log.remote()])
    store = median_ms(through(sender.store, n)) if framework != "arraybridge" else float("nan")  # Ray cannot pickle ours
    print(f"{n:>9} bytes: ours {ours:.2f} ms, store {store:.2f} ms ({store / ours:.2f}x)", flush=True)
    print("   sender   " + ", ".join(f"{k} {v * 1e3:.3f}" for k, v in sorted(sent.items())), flush=True)
    print("   receiver " + ", ".join(f"{k} {v * 1e3:.3f}" for k, v in sorted(received.items())), flush=True)
ray.shutdown()
