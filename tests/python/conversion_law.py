"""The one law of conversions, for the property test (test_conversion_law.py): the
result has exactly the source's values and dtype, or a MemoryConversionError is
raised; never a changed value, a narrower dtype, a writable alias of an immutable or
read-only source, an immutable (JAX, TensorFlow) alias of memory the source may still
write, a write into the source, or a crash. Shared by the in-process test
and the TensorFlow one, which runs in a subprocess (TensorFlow aborts on some input)."""
import importlib

import numpy as np
from hypothesis import assume, strategies as st
from hypothesis.extra import numpy as hnp

import arraybridge as ab

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
          "float64", "complex64", "complex128"]
PYCLESPERANTO_DTYPES = {"int8", "int16", "int32", "uint8", "uint16", "uint32", "float32"}
IMMUTABLE = {"jax", "tensorflow", "torch_grad"}  # immutable to their owners (autograd's, for torch_grad)


@st.composite
def arrays(draw):
    """A NumPy array of any dtype, with its extremes, NaN and inf among the values;
    0-d, empty or up to 3-d; a view with steps of +-1 or +-2 per axis; maybe read-only."""
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = tuple(draw(st.lists(st.integers(0, 4), max_size=3)))
    steps = [draw(st.sampled_from([1, -1, 2, -2])) for _ in shape]
    base = draw(hnp.arrays(dtype, tuple(n * abs(step) for n, step in zip(shape, steps))))
    view = base[tuple(slice(None, None, step) for step in steps)] if shape else base[...]  # 0-d stays an array
    view.flags.writeable = not draw(st.booleans())
    return view


# The dtypes each target holds as they are (JAX with jax_enable_x64 off, its default:
# no 64-bit types, refused rather than narrowed; the law above covers refusals).
TARGET_DTYPES = {
    "numpy": DTYPES, "torch": DTYPES, "tensorflow": DTYPES,
    "jax": [d for d in DTYPES if d not in ("int64", "uint64", "float64", "complex128")],
    "pyclesperanto": sorted(PYCLESPERANTO_DTYPES),
}


@st.composite
def layouts(draw, target):
    """A NumPy array of a dtype `target` holds, in any layout users pass: steps of
    +-1 to +-3 per axis (a flipped image, img[..., ::-1]), axes permuted, maybe an axis
    broadcast (stride 0); 1-d to 3-d, never empty (pyclesperanto has no empty arrays)."""
    dtype = np.dtype(draw(st.sampled_from(TARGET_DTYPES[target])))
    broadcast = draw(st.booleans())
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=2 if broadcast else 3)))
    steps = [draw(st.sampled_from([1, -1, 2, -2, 3, -3])) for _ in shape]
    base = draw(hnp.arrays(dtype, tuple(n * abs(step) for n, step in zip(shape, steps))))
    view = base[tuple(slice(None, None, step) for step in steps)]
    view = view.transpose(draw(st.permutations(range(view.ndim))))
    if broadcast:
        view = np.broadcast_to(view, (draw(st.integers(2, 3)),) + view.shape)  # read-only, as NumPy makes it
    return view


def check_layout(target, array):
    """`array` converted into `target` has exactly its values, shape and dtype: a
    layout the target cannot hold is copied, never refused."""
    result = ab.convert.convert_memory(array, "numpy", target, gpu_id=0 if target == "pyclesperanto" else None)
    got = values_of(target, result)
    assert got.dtype == array.dtype and got.shape == array.shape, (got.dtype, got.shape, array.strides)
    np.testing.assert_array_equal(got, array, strict=True)


def make_source(framework, array):
    """`array` as an array of `framework`, or None where that framework cannot hold it."""
    if framework == "numpy":
        return array
    if framework == "jax":
        jax = importlib.import_module("jax")
        return jax.device_put(array, jax.devices("cpu")[0])  # host memory, on a machine with a GPU too
    if framework == "tensorflow":
        return importlib.import_module("tensorflow").constant(array)
    if framework == "pyclesperanto":
        if array.dtype.name not in PYCLESPERANTO_DTYPES or not 1 <= array.ndim <= 3 or 0 in array.shape:
            return None
        return importlib.import_module("pyclesperanto").push(np.ascontiguousarray(array))
    if framework.startswith("torch"):
        torch = importlib.import_module("torch")
        array = np.array(array, order="C")  # a fresh copy: torch.tensor takes no negative strides, even of size 1
        if framework == "torch_conj":  # memory holding the conjugates, shown as the values
            return torch.tensor(np.conj(array)).conj() if array.dtype.kind == "c" else None
        if framework == "torch_neg":  # memory holding the negatives, shown as the values
            return torch.tensor(-array)._neg_view() if array.dtype.kind in "fc" else None
        if framework == "torch_grad":  # a leaf autograd owns
            return torch.tensor(array).requires_grad_() if array.dtype.kind in "fc" else None
        return torch.tensor(array)
    raise AssertionError(framework)


def type_name(framework):
    """The convert_memory type of a source kind ("torch_conj" is a torch tensor)."""
    return framework.partition("_")[0]


def values_of(framework, data):
    """A NumPy array with what `data` holds, read without arraybridge."""
    if framework == "tensorflow":
        return np.array(data.numpy(), copy=True)
    if framework == "pyclesperanto":
        return np.array(importlib.import_module("pyclesperanto").pull(data), copy=True)
    if framework.startswith("torch"):
        return np.array(data.detach().resolve_conj().resolve_neg().numpy(), copy=True)
    return np.array(np.asarray(data), copy=True)


def memory_of(framework, data):
    """A read-only NumPy view of the memory `data` lives in, where it is host memory."""
    if framework == "pyclesperanto":
        return None
    if framework.startswith("torch"):
        tensor = data.detach()
        tensor = tensor.conj() if tensor.is_conj() else tensor  # the same memory, its lazy bits undone
        return (tensor._neg_view() if tensor.is_neg() else tensor).numpy()
    return np.from_dlpack(ab.from_dlpack(data))


def check(source_type, target_type, array):
    """Converts `array` made a `source_type` array into `target_type`; asserts the law.
    Returns "converted" or "refused"."""
    source = make_source(source_type, array)
    assume(source is not None)
    expected = values_of(source_type, source)
    try:
        result = ab.convert.convert_memory(source, type_name(source_type), target_type,
                                   gpu_id=0 if target_type == "pyclesperanto" else None)
    except ab.MemoryConversionError:
        outcome = "refused"
    else:
        outcome = "converted"
        got = values_of(target_type, result)
        assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
        assert got.shape == expected.shape, (got.shape, expected.shape)
        np.testing.assert_array_equal(got, expected, strict=True)
        immutable = source_type in IMMUTABLE or (source_type == "numpy" and not array.flags.writeable)
        if target_type == "numpy" and immutable and result.flags.writeable:
            memory = memory_of(source_type, source)
            assert memory is None or not np.shares_memory(result, memory), "a writable alias of an immutable source"
        if target_type in IMMUTABLE and source_type not in IMMUTABLE:  # may be written (a read-only view's base is)
            memory = memory_of(source_type, source)
            assert memory is None or not np.shares_memory(memory_of(target_type, result), memory), \
                f"an immutable {target_type} array aliases memory its {source_type} source may still write"
    np.testing.assert_array_equal(values_of(source_type, source), expected, strict=True)  # the source is untouched
    return outcome


def check_device_round_trip(source_type, array, device):
    """to_device(source, device) and back to the CPU gives the source's values and
    dtype, or an ArrayBridgeError (never another exception)."""
    source = make_source(source_type, array)
    assume(source is not None)
    expected = values_of(source_type, source)
    try:
        there = ab.to_device(source, device)
    except ab.ArrayBridgeError:
        return "refused"
    back = np.from_dlpack(ab.to_device(there, "cpu", copy=True))
    assert back.dtype == expected.dtype and back.shape == expected.shape
    np.testing.assert_array_equal(back, expected, strict=True)
    return "converted"
