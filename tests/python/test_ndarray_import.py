"""A numpy.ndarray is read through the buffer protocol (_core/ndarray.c), not through
its __dlpack__. What a consumer gets must be what NumPy's own export gives: the
same memory, dtype, shape, strides and writability, and NumPy's refusal in NumPy's
words for what its export refuses. The same array wrapped in an object whose
__dlpack__ is the array's takes the general path, and is the reference."""
import gc
import weakref

import numpy as np
import pytest

import arraybridge as ab
from handmade_dlpack import OnlyDLPack  # the array's own export: the general import path


def seen(tensor):
    """What a NumPy consumer sees of a result: its memory, dtype, shape, strides, writability."""
    view = np.from_dlpack(tensor)
    return (view.__array_interface__["data"][0], view.dtype.str, view.shape, view.strides, view.flags.writeable)


DTYPES = ["?", "i1", "u1", "i2", "u2", "i4", "u4", "i8", "u8", "f2", "f4", "f8", "c8", "c16", "<f4", "=i8",
          np.intc, np.uintc, np.int_, np.uint, np.longlong, np.ulonglong, np.single, np.double, np.csingle]
LAYOUTS = {
    "compact": lambda a: a,
    "transposed": lambda a: a.T,
    "strided": lambda a: a[::2, 1::3],
    "reversed": lambda a: a[:, ::-1],
    "row": lambda a: a[1],
    "0-d": lambda a: a[0, 0, ...],
    "empty": lambda a: a[:0],
    "3-d": lambda a: a.reshape(2, 3, 4)[:, ::2],
}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_header_is_the_one_numpy_exports(dtype):
    base = (np.arange(24) % 7 + 1).astype(dtype).reshape(4, 6)
    for name, layout in LAYOUTS.items():
        for writeable in (True, False):
            array = layout(base.copy())
            array.flags.writeable = writeable
            ours, reference = ab.to_device(array, "cpu"), ab.to_device(OnlyDLPack(array), "cpu")
            assert seen(ours) == seen(reference), (name, writeable)
            assert seen(ours)[0] == array.__array_interface__["data"][0]  # a view of the array's own memory
            copied = np.from_dlpack(ab.to_device(array, "cpu", copy=True))
            assert copied.dtype == array.dtype and copied.shape == array.shape, (name, writeable)
            assert np.array_equal(copied, array), (name, writeable)
            assert not np.shares_memory(copied, array)


def test_numpy_arrays_are_read_through_the_buffer_protocol():
    # A contiguous array's dim of extent 1 keeps whatever stride it had; NumPy's buffer
    # protocol rewrites it and its __dlpack__ does not, so the header says which ran.
    array = np.arange(12.0).reshape(4, 3)[:, None, :]
    assert array.strides == (24, 0, 8) and array.flags.c_contiguous
    assert np.array_equal(np.from_dlpack(ab.to_device(array, "cpu", copy=True)), array)
    assert np.from_dlpack(ab.to_device(array, "cpu")).strides == (24, 24, 8)
    if np.from_dlpack(ab.to_device(OnlyDLPack(array), "cpu")).strides != (24, 0, 8):  # NumPy 2.2's rewrites it too
        pytest.skip(f"NumPy {np.__version__}'s __dlpack__ rewrites the stride too: the two paths look alike")


def test_a_read_only_array_stays_read_only():
    array = np.arange(6.0)
    array.flags.writeable = False
    with pytest.raises(BufferError):  # nothing may write what NumPy treats as immutable
        ab.copy(np.ones(6), array)
    assert np.array_equal(array, np.arange(6.0))
    assert not np.from_dlpack(ab.to_device(array, "cpu")).flags.writeable


@pytest.mark.parametrize("make", [
    lambda: np.zeros(3, ">f4"),                                        # another byte order
    lambda: np.zeros(3, np.longdouble),                                # not IEEE
    lambda: np.zeros(3, "U3"),                                         # no numbers
    lambda: np.zeros(3, "M8[s]"),                                      # no buffer at all
    lambda: np.zeros(3, object),
    lambda: np.zeros(4, dtype=[("a", "f4"), ("b", "u1")])["a"],        # strides of 5 bytes, items of 4
], ids=["byte order", "long double", "strings", "datetimes", "objects", "partial items"])
def test_what_numpy_refuses_is_refused_in_its_words(make):
    array = make()
    with pytest.raises(BufferError) as ours:
        ab.to_device(array, "cpu")
    with pytest.raises(BufferError) as reference:
        ab.to_device(OnlyDLPack(array), "cpu")
    # NumPy's own words, each restated naming the argument, its type and dtype (test_refusals)
    assert str(ours.value.__cause__) == str(reference.value.__cause__) and str(ours.value.__cause__)
    assert str(ours.value).startswith(f"arraybridge: x (a numpy.ndarray of dtype {array.dtype}) cannot go through "
                                      f"DLPack: {ours.value.__cause__}")


def test_a_subclass_is_exported_by_its_own_dlpack():
    class Refusing(np.ndarray):  # a subclass may change what its data means
        def __dlpack__(self, **kwargs):
            raise BufferError("Refusing refuses")

    with pytest.raises(BufferError, match="Refusing refuses"):
        ab.to_device(np.zeros(3).view(Refusing), "cpu")


def test_the_result_keeps_the_array_alive_and_lets_it_go():
    array = np.arange(1000.0)
    alive = weakref.ref(array)
    view = ab.to_device(array, "cpu")
    copied = ab.to_device([array, array[::2]], "cuda_host" if "cuda_host" in ab.devices() else "cpu", copy=True)
    del array
    gc.collect()
    assert alive() is not None  # the view's header holds it
    assert np.array_equal(np.from_dlpack(view), np.arange(1000.0))
    assert np.array_equal(np.from_dlpack(copied[1]), np.arange(0.0, 1000.0, 2.0))
    del view
    gc.collect()
    assert alive() is None
