"""pyclesperanto as a real peer on PoCL: its own OpenCL context, its own buffers.

Our buffers live in the runtime's context, which pyclesperanto cannot use
(CL_INVALID_CONTEXT), so data reaches it by one planned copy into an array it
allocated (arraybridge.copy); its arrays come to us through DLPack."""
import numpy as np
import pytest

import arraybridge as ab
from conftest import sample, views

cle = pytest.importorskip("pyclesperanto", reason="pyclesperanto is installed by `make test`; run it through make")

CLE_DTYPES = ["int8", "int16", "int32", "uint8", "uint16", "uint32", "float32"]


@pytest.mark.parametrize("dtype", CLE_DTYPES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "negative-stride", "sliced", "offset", "size-1"])
def test_numpy_into_pyclesperanto_and_back(dtype, layout):
    source = views(sample(dtype, (4, 6)))[layout]
    if source.ndim > 3:  # pyclesperanto takes up to 3 dimensions: (1, 4, 1, 6) -> (4, 1, 6)
        source = source[0]
    array = ab.convert.convert_memory(source, "numpy", "pyclesperanto", gpu_id=0)
    assert ab.convert.detect_memory_type(array) is ab.convert.MemoryType.PYCLESPERANTO
    assert tuple(array.shape) == source.shape and np.dtype(array.dtype) == source.dtype
    np.testing.assert_array_equal(cle.pull(array), source)  # pyclesperanto can read its buffer
    back = ab.convert.convert_memory(array, "pyclesperanto", "numpy", gpu_id=None)
    np.testing.assert_array_equal(back, source)


def test_pyclesperanto_computes_on_what_we_delivered():
    source = np.arange(12, dtype=np.float32).reshape(3, 4)
    array = ab.convert.convert_memory(source, "numpy", "pyclesperanto", gpu_id=0)
    np.testing.assert_array_equal(cle.pull(cle.add_image_and_scalar(array, scalar=1)), source + 1)


def test_pyclesperanto_arrays_move_to_our_devices():
    source = sample("uint16", (5, 7))
    array = cle.push(source)
    on_cpu = ab.to_device(array, "cpu")
    assert on_cpu.report.path == "device_to_host"
    np.testing.assert_array_equal(np.from_dlpack(on_cpu), source)
    ours = ab.to_device(array, "opencl:0")  # already there: a view of its buffer, in its context
    assert ours.report.path == "zero_copy"
    del array  # the view keeps pyclesperanto's array alive
    np.testing.assert_array_equal(np.from_dlpack(ours.to("cpu")), source)  # read through its context
    copied = ab.to_device(ours, "opencl:0", copy=True)  # a copy lands in our context
    assert copied.report.path in ("staged", "device_copy")
    np.testing.assert_array_equal(np.from_dlpack(copied.to("cpu")), source)


def test_copy_into_an_array_pyclesperanto_owns_converts_and_checks_shapes():
    target = cle.create((3, 4), dtype=np.float32)
    ab.copy(np.arange(12, dtype=np.int64).reshape(3, 4), target)  # int64 -> float32 on the way
    np.testing.assert_array_equal(cle.pull(target), np.arange(12, dtype=np.float32).reshape(3, 4))
    ours = ab.to_device(np.full((3, 4), 7, dtype=np.float32), "opencl:0")  # a buffer of our context
    ab.copy(ours, target)
    np.testing.assert_array_equal(cle.pull(target), np.full((3, 4), 7, dtype=np.float32))
    with pytest.raises(ab.ArrayBridgeError, match="copy: .*shape"):
        ab.copy(np.zeros((4, 3), dtype=np.float32), target)


def test_what_pyclesperanto_cannot_hold_is_refused_clearly():
    for data, gpu_id, reason in [(sample("float64"), 0, "no float64"), (sample("int64"), 0, "no int64"),
                                 (sample("complex64"), 0, "no complex64"), (sample("float32"), 5, "no device 5"),
                                 (np.zeros((2, 2, 2, 2), np.float32), 0, "1 to 3 dimensions"),
                                 (np.zeros((0, 3), np.float32), 0, r"no empty arrays \(it would make shape "
                                                                   r"\(0, 3\) into \(1, 3\)\)"),
                                 (sample("float32"), None, "gpu_id=None")]:
        with pytest.raises(ab.MemoryConversionError, match=reason) as error:
            ab.convert.convert_memory(data, "numpy", "pyclesperanto", gpu_id=gpu_id)
        assert error.value.target_type == "pyclesperanto"
    assert cle.get_device().name == cle.list_available_devices()[0]  # the current device is left alone
    # host staging is the planner's to refuse: within pyclesperanto's context one device copy is allowed...
    same = ab.convert.convert_memory(cle.push(sample("float32")), "pyclesperanto", "pyclesperanto", gpu_id=0,
                                     host_staging=False)
    np.testing.assert_array_equal(cle.pull(same), sample("float32"))
    # ...and a buffer of another context (ours) reaches it only through host memory: refused.
    ours = ab.to_device(sample("float32"), "opencl:0")
    with pytest.raises(ab.ArrayBridgeError, match="only host staging can bridge"):
        ab.copy(ours, same, host_staging=False)
    # strict=True, its old spelling, refuses the same, warning where the caller wrote it (this file).
    with pytest.warns(DeprecationWarning, match=r"^copy\(strict=True\) is copy\(host_staging=False\) now$") as caught:
        with pytest.raises(ab.ArrayBridgeError, match="only host staging can bridge"):
            ab.copy(ours, same, strict=True)
    assert caught[0].filename == __file__
    with pytest.warns(DeprecationWarning, match=r"^copy_many\(strict=True\) is copy_many\(host_staging=False\)"):
        with pytest.raises(ab.ArrayBridgeError, match="only host staging can bridge"):
            ab.copy_many([ours], [same], strict=True)
    with pytest.raises(TypeError, match=r"give host_staging= only \(strict= is its old spelling\)"):
        ab.copy(ours, same, strict=True, host_staging=False)
    # to_device parses it as copy does (in C), and so does a structure's (in Python) and Tensor.to.
    for move in (lambda: ab.to_device(ours, "cpu", strict=True), lambda: ab.to_device({"a": ours}, "cpu", strict=True),
                 lambda: ours.to("cpu", strict=True)):
        with pytest.warns(DeprecationWarning, match=r"(to_device|Tensor.to)\(strict=True\) is \S+\(host_staging=Fal") as said:
            moved = move()
        assert said[0].filename == __file__
        np.testing.assert_array_equal(np.from_dlpack(moved["a"] if isinstance(moved, dict) else moved), sample("float32"))
    ab.copy(ours, same)
    np.testing.assert_array_equal(cle.pull(same), sample("float32"))
    copied = ab.convert.convert_memory(cle.push(sample("float32")), "pyclesperanto", "pyclesperanto", gpu_id=0)
    np.testing.assert_array_equal(cle.pull(copied), sample("float32"))


def test_a_conversion_keeps_the_callers_current_device_among_two_of_one_name():
    """The OpenCL hunt of 2026-11-30: convert_memory(x, ..., "pyclesperanto", gpu_id) put
    the caller's current device back by its name, and select_device(name) picks the
    first device whose name holds it: a caller on the second of two GPUs of one model
    was left on the first. PoCL with two devices of one name shows it, in a process of
    its own (POCL_DEVICES is read once)."""
    import os
    import subprocess
    import sys
    code = """
import numpy as np, pyclesperanto as cle, arraybridge as ab
names = cle.list_available_devices()  # a GPU machine lists its GPU's OpenCL devices too
twins = [i for i, name in enumerate(names) if names.count(name) > 1][:2]
assert len(twins) == 2, names
devices = {i: cle.select_device(i) for i in twins}
assert devices[twins[0]] != devices[twins[1]]
for current, asked in ((twins[1], twins[0]), (twins[0], twins[1]), (twins[1], twins[1])):
    cle.select_device(current)
    made = ab.convert.convert_memory(np.arange(6.0, dtype=np.float32), "numpy", "pyclesperanto", asked)
    assert made.device == devices[asked] and np.array_equal(np.asarray(made), np.arange(6.0)), asked
    assert cle.get_device() == devices[current], (current, asked)
print("ok")
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, POCL_DEVICES="pthread pthread"))
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout + done.stderr[-2000:]
