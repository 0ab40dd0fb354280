"""The actors of test_ray.py, in a module of their own so that Ray's workers import
them by name. Each array a sender makes is rebuilt by the receiver from the same
recipe (recipe(kind, framework)) and compared exactly: values, dtype, shape and
whether it may be written."""
import importlib.util
import os

import numpy as np
import ray

import arraybridge.ray as abray

# Registered where this module is imported (the driver, and each worker that unpickles
# the actors): ray.method checks its tensor_transport when the class is made.
FRAMEWORKS = ["numpy", "arraybridge"] + [f for f in ("torch", "jax", "pyclesperanto") if importlib.util.find_spec(f)]
abray.register(FRAMEWORKS)

# What a sender returns for a kind, as NumPy arrays (framework arrays made from these).
KINDS = ("strided", "0-d", "empty", "bool", "complex", "int64", "read-only", "bf16")


def recipe(kind):
    """The NumPy array of `kind` (bf16: float32 values a bfloat16 holds exactly)."""
    base = np.arange(48, dtype=np.float32).reshape(6, 8) - 20.5  # float32: JAX without x64 holds it
    if kind == "strided":
        return base[::2, ::-3]
    if kind == "0-d":
        return np.array(-7.25, dtype=np.float32)
    if kind == "empty":
        return np.zeros((0, 3), dtype=np.int16)
    if kind == "bool":
        return (np.arange(10) % 3 == 0)
    if kind == "complex":
        return (base[:2] + 1j * base[2:4]).astype(np.complex64)
    if kind == "int64":
        return np.array([2**40 + 1, -2**62, 7], dtype=np.int64)
    if kind == "read-only":
        frozen = np.arange(5, dtype=np.uint16)
        frozen.flags.writeable = False
        return frozen
    if kind == "bf16":
        return np.array([1.0, -2.5, 0.15625, 65280.0], dtype=np.float32)
    raise AssertionError(kind)


def make(framework, kind):
    """recipe(kind) as `framework`'s array."""
    array = recipe(kind)
    if framework == "numpy":
        return array
    if framework == "torch":
        import torch
        if kind == "strided":  # a transposed view: strides of its own, the same values
            return torch.tensor(np.array(array.T, order="C")).t()
        t = torch.tensor(np.array(array, order="C"))  # not ascontiguousarray: it makes a 0-d array 1-d
        return t.to(torch.bfloat16) if kind == "bf16" else t
    if framework == "jax":
        import jax
        import jax.numpy as jnp
        cpu = jax.devices("cpu")[0]
        if kind == "bf16":
            return jax.device_put(jnp.asarray(array, dtype=jnp.bfloat16), cpu)
        return jax.device_put(np.array(array, order="C"), cpu)
    if framework in ("arraybridge", "cuda"):  # arraybridge Tensors on OpenCL, or on CUDA (the fake driver here)
        import arraybridge as ab
        device = "cuda:0" if framework == "cuda" else "opencl:0"
        return ab.to_device(array, device, copy=True, dtype="bfloat16" if kind == "bf16" else None)
    if framework == "pyclesperanto":
        import pyclesperanto as cle
        return cle.push(np.array(array, order="C"))
    raise AssertionError(framework)


def values(framework, x):
    """(NumPy array of x's values, dtype name, writable) read without arraybridge where
    the framework can (arraybridge Tensors on OpenCL through arraybridge)."""
    if framework == "numpy":
        return np.array(x), x.dtype.name, x.flags.writeable
    if framework == "torch":
        import torch
        name = str(x.dtype).replace("torch.", "")
        return (x.float() if x.dtype == torch.bfloat16 else x).numpy().copy(), name, True
    if framework == "jax":
        import jax.numpy as jnp
        name = str(x.dtype)
        return np.array(x.astype(jnp.float32) if name == "bfloat16" else x), name, False
    if framework == "arraybridge":
        plain = x.to("cpu", copy=True, dtype="float32" if x.dtype == "bfloat16" else None)
        return np.from_dlpack(plain), x.dtype, not x.read_only
    if framework == "pyclesperanto":
        import pyclesperanto as cle
        pulled = cle.pull(x)
        return pulled, np.dtype(pulled.dtype).name, True
    raise AssertionError(framework)


EXPECTED_DTYPE = {"bf16": "bfloat16"}


def mismatch(kind, got, dtype, framework):
    """What is wrong with the values `got` (NumPy) of dtype name `dtype` that arrived
    for recipe(kind) in `framework` ("": nothing)."""
    expected = recipe(kind)
    want_dtype = expected.dtype.name if framework == "pyclesperanto" else EXPECTED_DTYPE.get(kind, expected.dtype.name)
    if dtype != want_dtype or got.shape != expected.shape:
        return f"{kind}: {dtype} {got.shape}, not {want_dtype} {expected.shape}"
    if not np.array_equal(got.astype(expected.dtype) if kind == "bf16" else got, expected):
        return f"{kind}: values {got!r}, not {expected!r}"
    return ""


class Sender:
    """Returns each kind of array through a framework's transport: one method per
    framework, named after it. A framework that may be missing gets its method below,
    only where it is installed (ray.method refuses a transport nobody registered)."""
    @ray.method(tensor_transport="AB_NUMPY")
    def numpy(self, kinds):
        return {kind: make("numpy", kind) for kind in kinds}

    @ray.method(tensor_transport="AB_TENSOR")
    def arraybridge(self, kinds):
        return {kind: make("arraybridge", kind) for kind in kinds}

    @ray.method(tensor_transport="AB_TENSOR")
    def cuda(self, kinds):
        return {kind: make("cuda", kind) for kind in kinds}

    @ray.method(tensor_transport="AB_NUMPY")
    def many(self, count, size):
        return {f"w{i}": np.full(size, i, dtype=np.float32) for i in range(count)}

    @ray.method(tensor_transport="AB_NUMPY")
    def unsendable(self):
        return {"fine": np.zeros(3), "text": np.array(["a", "b"])}

    @ray.method(tensor_transport="AB_NUMPY")
    def big(self, nbytes):
        return np.ones(nbytes, dtype=np.uint8)

    def stats(self):
        return abray._stats()

    def holds(self, object_id):
        """Whether this sender still keeps the packed copy of that object."""
        return object_id in abray._published

    def pid(self):
        return os.getpid()


def _send_through(framework):
    def send(self, kinds):
        return {kind: make(framework, kind) for kind in kinds}
    send.__name__ = send.__qualname__ = framework
    return ray.method(tensor_transport=abray.transport(framework))(send)


def _autograd(self):
    """Leaf and non-leaf tensors that require grad, and one that does not."""
    import torch
    leaf = torch.tensor([1.5, -2.0, 3.25], requires_grad=True)
    return {"leaf": leaf, "made": leaf * 2, "plain": torch.arange(3, dtype=torch.float32)}


def _unpublishable(self):
    """A torch float8 tensor among others: NIXL cannot publish it."""
    import torch
    return {"w": torch.ones(2), "b": torch.zeros(3), "scale": torch.ones(2).to(torch.float8_e4m3fn)}


for _framework in sorted(set(FRAMEWORKS) - {"numpy", "arraybridge"}):
    setattr(Sender, _framework, _send_through(_framework))
if "torch" in FRAMEWORKS:
    Sender.autograd = ray.method(tensor_transport="AB_TORCH")(_autograd)
    Sender.unpublishable = ray.method(tensor_transport="AB_TORCH")(_unpublishable)
Sender = ray.remote(Sender)


@ray.remote(enable_tensor_transport=True)  # Ray's rule for a receiver: a thread of its own reads
class Receiver:
    def __init__(self, device=None, framework=None):
        if device is not None:
            abray.receive_on(device, framework)

    def check(self, framework, received):
        """A list of problems with what arrived (empty: every array exact)."""
        problems = []
        for kind, x in received.items():
            got, dtype, writable = values(framework, x)
            problems += filter(None, [mismatch(kind, got, dtype, framework)])
            if framework == "numpy" and writable == (kind == "read-only"):
                problems.append(f"{kind}: writable is {writable}")
        return problems

    def devices(self, received):
        return {kind: x.device for kind, x in received.items()}

    def many(self, received):
        return sorted((key, float(value[0]), value.shape[0]) for key, value in received.items())

    def autograd(self, received):
        return {key: (x.requires_grad, x.is_leaf, x.detach().tolist()) for key, x in received.items()}

    def size(self, received):
        return int(received.sum())

    def stats(self):
        return abray._stats()
