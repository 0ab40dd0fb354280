"""Real DLPack peers: JAX (CPU) here; torch, CuPy and JAX on CUDA where a GPU is."""
import numpy as np
import pytest

import arraybridge as ab
from conftest import DEVICES, data_pointer, requires_cuda, sample, views

jax = pytest.importorskip("jax", reason="JAX is installed by `make test`; run it through make")
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

JAX_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "float32", "float64", "complex64", "complex128"]


def jax_pointer(array):
    return array.unsafe_buffer_pointer()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", JAX_DTYPES)
def test_jax_arrays_round_trip(device, dtype):
    expected = sample(dtype, (3, 5))
    x = jnp.asarray(expected)
    back = np.from_dlpack(ab.to_device(ab.to_device(x, device), "cpu"))
    np.testing.assert_array_equal(back, expected)
    assert back.dtype == expected.dtype


@pytest.mark.parametrize("layout", ["contiguous", "transposed", "negative-stride", "0-d", "zero-size", "sliced",
                                    "size-1", "permuted-3d"])
def test_jax_takes_our_tensors_of_any_layout_when_asked_for_compact_ones(layout):
    source = views(sample("float32"))[layout]
    tensor = ab.to_device(source, "cpu", contiguous=True)
    compact = source.flags.c_contiguous
    assert tensor.report.path == ("zero_copy" if compact else "host_copy")
    np.testing.assert_array_equal(np.asarray(jnp.from_dlpack(tensor)), source)
    if compact and source.size:
        assert data_pointer(np.from_dlpack(tensor)) == data_pointer(source)


def test_jax_to_numpy_through_us_is_zero_copy():
    # On the CPU explicitly: with a GPU present, JAX puts new arrays there.
    x = jax.device_put(jnp.arange(64, dtype=jnp.float32).reshape(8, 8), jax.devices("cpu")[0])
    tensor = ab.to_device(x, "cpu")
    assert tensor.report.path == "zero_copy"
    assert data_pointer(np.from_dlpack(tensor)) == jax_pointer(x)


def test_detect_memory_type():
    class Sub(np.ndarray):  # a subclass defined outside numpy still counts
        pass

    assert ab.convert.detect_memory_type(np.zeros(2)) is ab.convert.MemoryType.NUMPY
    assert ab.convert.detect_memory_type(np.zeros(2).view(Sub)) is ab.convert.MemoryType.NUMPY
    assert ab.convert.detect_memory_type(jnp.zeros(2)) is ab.convert.MemoryType.JAX
    with pytest.raises(ValueError, match="list"):
        ab.convert.detect_memory_type([1, 2])
    assert ab.convert.MemoryType("jax") is ab.convert.MemoryType.JAX
    assert ab.convert.CPU_MEMORY_TYPES | ab.convert.GPU_MEMORY_TYPES == ab.convert.SUPPORTED_MEMORY_TYPES


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int64", "float32", "float64", "complex128"])
def test_convert_memory_numpy_and_jax_both_ways(dtype):
    expected = sample(dtype, (4, 3))
    as_jax = ab.convert.convert_memory(expected.T, "numpy", "jax", gpu_id=None)
    assert ab.convert.detect_memory_type(as_jax) is ab.convert.MemoryType.JAX
    np.testing.assert_array_equal(np.asarray(as_jax), expected.T)
    as_numpy = ab.convert.convert_memory(as_jax, ab.convert.MemoryType.JAX, ab.convert.MemoryType.NUMPY)
    assert isinstance(as_numpy, np.ndarray)
    np.testing.assert_array_equal(as_numpy, expected.T)
    assert data_pointer(as_numpy) == jax_pointer(as_jax)  # one exchange, no copy


def test_convert_memory_numpy_to_numpy_is_the_same_memory():
    source = sample("int32")
    assert data_pointer(ab.convert.convert_memory(source, "numpy", "numpy")) == data_pointer(source)
    assert data_pointer(ab.convert.convert_memory(source, "numpy", "numpy", host_staging=False)) == data_pointer(source)


def test_convert_memory_errors_name_source_target_and_reason():
    with pytest.raises(ab.MemoryConversionError) as caught:
        ab.convert.convert_memory(np.ones(3), "jax", "numpy")
    assert (caught.value.source_type, caught.value.target_type) == ("jax", "numpy")
    assert "numpy array, not jax" in caught.value.reason
    if ab.backends()[1].available is False:  # gpu_id=0 asks for CUDA, which is absent here
        with pytest.raises(ab.MemoryConversionError, match="CUDA unavailable") as caught:
            ab.convert.convert_memory(np.ones(3), "numpy", "jax")
        assert isinstance(caught.value.__cause__, ab.DeviceError)
    with pytest.raises(ab.MemoryConversionError, match="gpu_id"):
        ab.convert.convert_memory(np.ones(3), "numpy", "jax", gpu_id=-1)
    with pytest.raises(ab.MemoryConversionError, match="CuPy arrays live on a GPU"):
        ab.convert.convert_memory(np.ones(3), "numpy", "cupy", gpu_id=None)
    with pytest.raises(ValueError, match="mxnet"):
        ab.convert.convert_memory(np.ones(3), "numpy", "mxnet")
    with pytest.raises(ab.MemoryConversionError, match="not an array"):
        ab.convert.convert_memory("text", "numpy", "jax", gpu_id=None)


# ------------------------------------------------------------------ CUDA peers


@requires_cuda
@pytest.mark.parametrize("framework", ["torch", "cupy", "jax"])
def test_cuda_framework_tensors_are_taken_and_given_back_zero_copy(framework):
    module = pytest.importorskip(framework)
    expected = sample("float32", (16, 16))
    if framework == "torch":
        x = module.from_numpy(expected).cuda()
        pointer = x.data_ptr()
    elif framework == "cupy":
        x = module.asarray(expected)
        pointer = x.data.ptr
    else:
        x = jax.device_put(expected, jax.devices("gpu")[0])
        pointer = x.unsafe_buffer_pointer()
    tensor = ab.to_device(x, "cuda:0")
    assert tensor.report.path == "zero_copy" and tensor.data_ptr + tensor.byte_offset == pointer
    np.testing.assert_array_equal(np.from_dlpack(ab.to_device(tensor, "cpu")), expected)
    target = {"torch": "torch", "cupy": "cupy", "jax": "jax"}[framework]
    again = ab.convert.convert_memory(x, target, target, gpu_id=0)
    np.testing.assert_array_equal(np.from_dlpack(ab.to_device(again, "cpu")), expected)
