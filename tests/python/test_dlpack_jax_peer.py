"""JAX's own DLPack interoperability tests (tests/array_interoperability_test.py),
restated in our words with an arraybridge Tensor between JAX and itself: every
dtype JAX's test names (with bool and complex added) times every shape it names
(scalars, size-1 dims, empty) goes JAX -> us -> JAX zero-copy with its values, a
capsule is consumed once, and x64 decides what JAX may hold, as there."""
import re

import numpy as np
import pytest

import arraybridge as ab
from conftest import jax_x64

jax = pytest.importorskip("jax", reason="JAX is installed by `make test`; run it through make")
jnp = pytest.importorskip("jax.numpy")
# JAX's arrays here live in host memory, as JAX's own DLPack tests on the CPU (where
# JAX has a GPU, its default device is the GPU: an H100 run, 2026-11-26).
CPU = jax.devices("cpu")[0]

DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64",
          "bool", "complex64", "complex128"]
SHAPES = [(), (4,), (3, 4), (2, 3, 4), (3, 1), (1, 4), (2, 1, 4), (0,), (0, 4), (3, 0)]


@pytest.fixture
def x64():
    with jax_x64(True):
        yield


def values(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    raw = rng.standard_normal(shape) * 50
    if np.dtype(dtype).kind == "c":
        raw = raw + 1j * rng.standard_normal(shape)
    if np.dtype(dtype).kind in "iub":
        info = np.iinfo(dtype) if dtype != "bool" else None
        raw = raw > 0 if dtype == "bool" else np.clip(raw, info.min, info.max)
    return raw.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_jax_round_trip_through_a_tensor(shape, dtype, x64):
    expected = values(shape, dtype)
    x = jax.device_put(expected, CPU)
    ours = ab.to_device(x, "cpu")
    assert ours.report.path == "zero_copy" and ours.read_only  # JAX's memory, and JAX's arrays are immutable
    assert ours.shape == shape and ours.dtype == dtype
    back = jnp.from_dlpack(ours)  # JAX asks for a legacy capsule: a copy of its own, since ours is read-only
    assert back.dtype == x.dtype and back.shape == shape
    np.testing.assert_array_equal(np.asarray(back), expected)
    np.testing.assert_array_equal(np.asarray(ab.convert.convert_memory(x, "jax", "jax", gpu_id=None)), expected)


def test_a_capsule_is_consumed_at_most_once():
    capsule = jax.device_put(np.arange(4.0), CPU).__dlpack__()
    ab.from_dlpack(capsule)
    with pytest.raises(BufferError, match="already consumed"):
        ab.from_dlpack(capsule)


@pytest.mark.parametrize("dtype", ["int64", "uint64", "float64", "complex128"])
def test_without_x64_jax_gets_no_wide_dtype_from_us(dtype):
    with jax_x64(False), pytest.raises(ab.MemoryConversionError, match=f"JAX keeps no {dtype} while jax_enable_x64"):
        ab.convert.convert_memory(values((3,), dtype), "numpy", "jax", gpu_id=None)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bool", "complex64", "int8", "uint32", "bfloat16"])
def test_a_jax_cpu_array_is_read_in_place_read_only_and_kept_alive(dtype):
    """JAX's CPU arrays are read through their buffer (a sixth of their __dlpack__'s
    cost), bfloat16, which JAX gives no buffer, through __dlpack__: the same memory,
    read-only either way, alive after the array is deleted until the view goes."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x = jax.device_put(jnp.arange(64).reshape(8, 8).astype(dtype), jax.devices("cpu")[0])
    expected = np.asarray(x).copy()
    t = ab.to_device(x, "cpu")
    assert t.report.path == "zero_copy" and t.read_only and t.dtype == dtype
    if dtype != "bfloat16":
        assert t.data_ptr == np.asarray(x).ctypes.data  # JAX's own memory
    x.delete()
    back = np.asarray(jnp.from_dlpack(ab.to_device(t, "cpu", copy=True)))  # NumPy has no bfloat16: JAX reads it
    np.testing.assert_array_equal(back, expected, strict=True)
    if dtype != "bfloat16":
        view = np.from_dlpack(t)
        with pytest.raises(ValueError, match="read-only"):
            view[0] = 0


@pytest.mark.parametrize("dtype, wider", [("int4", "int8"), ("uint4", "uint8")])
def test_a_jax_dtype_dlpack_has_no_code_for_is_our_refusal(dtype, wider):
    """The frameworks hunt of 2026-11-30: to_device of a JAX int4 array raised JAX's own
    JaxRuntimeError ("XLA type S4 has no DLPack equivalent"), a RuntimeError that no
    `except BufferError` catches. Now our DLPackError says which argument, and what to pass."""
    x = jax.device_put(jnp.arange(4, dtype=dtype), CPU)
    for role, call in {"x": lambda: ab.to_device(x, "cpu"), "x[0]": lambda: ab.to_device([x], "cpu"),
                       "src": lambda: ab.copy(x, np.zeros(4, wider))}.items():
        with pytest.raises(ab.DLPackError, match=rf"arraybridge: {re.escape(role)} \(a [\w.]+ of dtype {dtype}\) cannot "
                                                 rf"go through DLPack: .*pass {re.escape(role)}.astype\('{wider}'\)"):
            call()
    np.testing.assert_array_equal(np.from_dlpack(ab.to_device(x.astype(wider), "cpu")), np.arange(4))


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint8", "bool", "complex64", "float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(), (3, 4), (0, 4)], ids=str)
def test_jnp_asarray_and_array_of_a_tensor_give_its_values(shape, dtype):
    """The ecosystem hunt of 2026-12-01: jnp.asarray(t) and jnp.array(t) raised NumPy's
    ValueError "Could not convert ... to a NumPy dtype (via `.dtype` value 'float32')",
    where a torch tensor goes through. Tensor.__jax_array__ answers them now."""
    source = np.asarray(values(shape, "float32" if dtype == "bfloat16" else dtype))
    t = ab.to_device(source, "cpu", copy=True, dtype=dtype)
    expected = np.asarray(jnp.from_dlpack(ab.to_device(t, "cpu", copy=True)))  # JAX's reading of the same bytes
    for made in (jnp.asarray(t), jnp.array(t)):
        assert made.dtype == jnp.dtype(dtype) and made.shape == shape
        np.testing.assert_array_equal(np.asarray(made), expected, strict=True)


def test_jnp_asarray_of_a_tensor_is_a_copy_that_never_changes():
    # JAX aliases memory aligned as it likes: the source is our own allocation (aligned),
    # and each Tensor below is a view of memory its owner still writes, read-only or not.
    source = np.from_dlpack(ab.to_device(np.arange(12, dtype=np.float32).reshape(3, 4), "cpu", copy=True))
    read_only_view = source.view()
    read_only_view.flags.writeable = False
    torch = pytest.importorskip("torch")
    twin = torch.from_numpy(source)
    legacy = ab.from_dlpack(torch.utils.dlpack.to_dlpack(twin))  # read-only: a legacy capsule cannot say otherwise
    views = [ab.to_device(source, "cpu"), ab.to_device(read_only_view, "cpu"), legacy]
    assert [v.read_only for v in views] == [False, True, True] and {v.data_ptr for v in views} == {source.ctypes.data}
    made = [jnp.asarray(v) for v in views]
    source[0, 0] = 99
    assert [float(m[0, 0]) for m in made] == [0.0, 0.0, 0.0]  # JAX's arrays never change
    frozen = jax.device_put(jnp.arange(5.0), CPU)
    np.testing.assert_array_equal(np.asarray(jnp.asarray(ab.to_device(frozen, "cpu"))), np.arange(5.0))
    strided = jnp.asarray(ab.to_device(source[:, ::2], "cpu"))  # JAX takes compact memory only: packed
    np.testing.assert_array_equal(np.asarray(strided), source[:, ::2])
    np.testing.assert_array_equal(np.asarray(jnp.asarray([ab.to_device(source, "cpu")] * 2)), np.stack([source] * 2))
    np.testing.assert_array_equal(np.asarray(jnp.ones(4) + ab.to_device(source[1], "cpu")), source[1] + 1)


def test_jnp_asarray_of_a_tensor_is_never_narrowed_and_names_what_it_cannot_do():
    wide = ab.to_device(np.array([2**40, -3], dtype=np.int64), "cpu")
    with jax_x64(False), pytest.raises(ValueError, match=r"arraybridge: JAX keeps no int64 while jax_enable_x64 is "
                                                         r"off.*cast it first, t.to\(t.device, dtype=...\)"):
        jnp.asarray(wide)  # jnp.from_dlpack would give [0, -3]
    with jax_x64(True):
        made = jnp.asarray(wide)
        assert made.dtype == jnp.int64 and made.tolist() == [2**40, -3]
    with pytest.raises(TypeError, match=r"JAX has no arrays in opencl:0 memory.*jnp.asarray\(t.to\('cpu'\)\)"):
        jnp.asarray(ab.to_device(np.ones(3, np.float32), "opencl:0"))
    with pytest.raises(ValueError, match="jax.numpy.array"):  # JAX's own rule: jitted functions take JAX arrays
        jax.jit(lambda a: a * 2)(ab.to_device(np.ones(3, np.float32), "cpu"))


def test_jnp_asarray_of_a_cuda_tensor_is_a_jax_array_on_that_gpu():
    try:
        gpu = jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("JAX has no GPU here (a GPU machine runs this)")
    source = np.arange(12, dtype=np.float32).reshape(3, 4)
    made = jnp.asarray(ab.to_device(source, "cuda:0"))
    assert made.devices() == {gpu}
    np.testing.assert_array_equal(np.asarray(made), source)
