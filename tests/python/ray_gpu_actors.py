"""The actors of test_ray_gpu.py: CuPy, JAX and torch arrays on a real CUDA GPU, each
sender and receiver holding half of it (Ray then shows both the GPU). Imported only
where a GPU and the framework are: ray.method checks its transport when the class is
made. The arrays are ray_actors.recipe's, compared exactly as there."""
import importlib.util

import numpy as np
import ray

import arraybridge.ray as abray
from ray_actors import mismatch, recipe

FRAMEWORKS = [f for f in ("torch", "cupy", "jax") if importlib.util.find_spec(f)]
abray.register(FRAMEWORKS)


def make(framework, kind):
    """recipe(kind) as `framework`'s array on cuda:0 (a strided kind as a strided view)."""
    array = recipe(kind)
    if framework == "torch":
        import torch
        if kind == "strided":
            return torch.tensor(np.array(array.T, order="C"), device="cuda:0").t()
        t = torch.tensor(np.array(array, order="C"), device="cuda:0")
        return t.to(torch.bfloat16) if kind == "bf16" else t
    if framework == "cupy":
        import cupy
        if kind == "strided":  # the same view of the same base as the recipe's
            base = cupy.asarray(np.arange(48, dtype=np.float32).reshape(6, 8) - 20.5)
            return base[::2, ::-3]
        return cupy.asarray(np.array(array, order="C"))
    if framework == "jax":
        import jax
        import jax.numpy as jnp
        gpu = jax.devices("gpu")[0]
        if kind == "bf16":
            return jax.device_put(jnp.asarray(array, dtype=jnp.bfloat16), gpu)
        return jax.device_put(np.array(array, order="C"), gpu)
    raise AssertionError(framework)


def values(framework, x):
    """(NumPy array of x's values, dtype name, device name) read by the framework itself."""
    if framework == "torch":
        import torch
        name = str(x.dtype).replace("torch.", "")
        host = (x.float() if x.dtype == torch.bfloat16 else x).cpu().numpy().copy()
        return host, name, f"{x.device.type}:{x.device.index}"
    if framework == "cupy":
        import cupy
        return cupy.asnumpy(x), x.dtype.name, f"cuda:{x.device.id}"
    if framework == "jax":
        import jax.numpy as jnp
        name = str(x.dtype)
        device = list(x.devices())[0]
        host = np.array(x.astype(jnp.float32) if name == "bfloat16" else x)
        return host, name, f"cuda:{device.id}" if device.platform == "gpu" else str(device)
    raise AssertionError(framework)


def kinds_of(framework):
    """The recipe's kinds the framework holds on a GPU: CuPy has no bfloat16, JAX
    without x64 no int64 (it refuses rather than narrow: test_ray.py)."""
    from ray_actors import KINDS
    left_out = {"cupy": {"bf16"}, "jax": {"int64"}}.get(framework, set())
    return [kind for kind in KINDS if kind not in left_out]


def _sender_class():
    """Sender, with one method per framework here (named after it) that returns the
    recipe's kinds on cuda:0 through that framework's transport."""
    def holds(self, object_id):
        """Whether this sender still keeps what it published for that object."""
        return object_id in abray._published

    methods = {"holds": holds, "__module__": __name__, "__qualname__": "Sender"}
    for framework in FRAMEWORKS:
        def send(self, kinds, framework=framework):
            return {kind: make(framework, kind) for kind in kinds}
        send.__name__ = send.__qualname__ = framework
        methods[framework] = ray.method(tensor_transport=abray.transport(framework))(send)
    return type("Sender", (), methods)


Sender = ray.remote(num_gpus=0.5)(_sender_class())


@ray.remote(num_gpus=0.5, enable_tensor_transport=True)
class Receiver:
    def __init__(self, framework):
        abray.receive_on("cuda:0", framework)

    def check(self, framework, received):
        """A list of problems with what arrived (empty: every array exact, on cuda:0)."""
        problems = []
        for kind, x in received.items():
            got, dtype, device = values(framework, x)
            if device != "cuda:0":
                problems.append(f"{kind}: on {device}, not cuda:0")
            problems += filter(None, [mismatch(kind, got, dtype, framework)])
        return problems

    def stats(self):
        return abray._stats()
