"""Many arrays in one call: to_device of a structure (nested dicts, lists, tuples)
comes back as the same structure of Tensors, moved by one abr_to_device_many;
to_device_many takes a flat list. Values, dtypes, shared blocks, and all or
nothing on failure."""
import numpy as np
import pytest

import arraybridge as ab


def _arrays():
    return {
        "image": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
        "labels": np.array([3, 1, 2], dtype=np.int64),
        "extras": [np.linspace(0, 1, 5), (np.array([True, False]), np.arange(6, dtype=np.int16)[::2])],
    }


def _same_structure(result, source):
    if isinstance(source, dict):
        assert type(result) is dict and list(result) == list(source)
        for key in source:
            _same_structure(result[key], source[key])
    elif isinstance(source, (list, tuple)):
        assert type(result) is type(source) and len(result) == len(source)
        for r, s in zip(result, source):
            _same_structure(r, s)
    else:
        assert isinstance(result, ab.Tensor)
        back = np.from_dlpack(ab.to_device(result, "cpu")) if result.device != "cpu" else np.from_dlpack(result)
        assert back.dtype == source.dtype and back.shape == source.shape
        np.testing.assert_array_equal(back, source)


@pytest.mark.parametrize("device", ["cpu", "opencl:0"])
def test_a_structure_comes_back_as_the_same_structure_with_every_value(device):
    arrays = _arrays()
    moved = ab.to_device(arrays, device, copy=True)
    _same_structure(moved, arrays)
    said = moved["image"].report.detail
    assert said.startswith("5 of 5 tensors packed into one") and \
        said.endswith(("block; 0 view(s), 0 other copy(ies)" if device == "cpu" else
                       "block, through one mapping of the device's memory; 0 view(s), 0 other copy(ies)"))


@pytest.mark.parametrize("inner", [list, tuple, lambda xs: {"a": xs[0], "b": xs[1]}])
def test_a_list_holding_a_container_is_a_structure_not_a_flat_batch(inner):
    # the flat-list check (_core.is_flat) sends a list with any list, tuple or dict in it the structure's way
    arrays = [np.arange(3.0), inner([np.arange(2, dtype=np.int32), np.ones(4, dtype=np.int8)])]
    moved = ab.to_device(arrays, "cpu", copy=True)
    _same_structure(moved, arrays)
    assert ab._core.is_flat([np.arange(2), np.arange(3)]) and not ab._core.is_flat(arrays)
    assert not ab._core.is_flat((np.arange(2),))  # a tuple comes back a tuple: the structure's way


def test_small_copies_share_one_device_buffer_that_outlives_the_others():
    arrays = [np.full(256, i, dtype=np.float32) for i in range(8)]
    moved = ab.to_device_many(arrays, "opencl:0", copy=True)
    assert len({t.data_ptr for t in moved}) == 1  # one cl_mem
    assert [t.byte_offset for t in moved] == [i * 1024 for i in range(8)]  # 1 KiB slots
    last = moved.pop()
    del moved
    np.testing.assert_array_equal(np.from_dlpack(ab.to_device(last, "cpu")), np.full(256, 7, dtype=np.float32))


def test_views_stay_views_and_a_dtype_applies_to_every_array():
    arrays = [np.arange(4.0), np.arange(3.0)]
    views = ab.to_device(arrays, "cpu")
    assert [t.report.detail for t in views][0].startswith("2 tensors: 2 view(s)")
    converted = ab.to_device(tuple(arrays), "cpu", dtype="float32")
    assert [np.from_dlpack(t).dtype for t in converted] == [np.float32, np.float32]


def test_a_bad_array_fails_the_whole_call_naming_its_place():
    with pytest.raises(TypeError, match=r"^to_device: x\[1\] \(a str\) is neither a DLPack capsule"):
        ab.to_device([np.ones(3), "not an array"], "cpu")
    with pytest.raises(ab.CopyRequiredError) as refused:
        ab.to_device({"a": np.ones(2), "b": np.ones(3)}, "cpu", copy=False, dtype="float32")
    message = str(refused.value)
    assert "x['a']: copy=False, but a copy is required" in message and "srcs" not in message  # its place in x
    assert ab.to_device_many([], "cpu") == []


def test_copy_of_a_structure_into_a_structure_of_the_same_shape():
    src = {"a": np.arange(4.0), "b": [np.arange(3, dtype=np.int32), (np.ones((2, 2)),)]}
    dst = {"a": np.zeros(4), "b": [np.zeros(3, dtype=np.int32), (np.zeros((2, 2)),)]}
    ab.copy(src, dst)
    np.testing.assert_array_equal(dst["a"], src["a"])
    np.testing.assert_array_equal(dst["b"][0], src["b"][0])
    np.testing.assert_array_equal(dst["b"][1][0], src["b"][1][0])
    on_device = ab.to_device(dst, "opencl:0", copy=True)
    ab.copy({"a": np.full(4, 7.0), "b": [np.full(3, 5, np.int32), (np.full((2, 2), 2.0),)]}, on_device)
    np.testing.assert_array_equal(np.from_dlpack(ab.to_device(on_device["b"][1][0], "cpu")), np.full((2, 2), 2.0))


def test_a_mapping_is_copied_by_key_whatever_the_order_of_either_side():
    """A newcomer's trial: a state dict saved in one key order, copied into a model's
    own (load_state_dict pairs by key), was refused: "the keys of src differ"."""
    src = {"bias": np.full(2, 1.0), "weight": {"b": np.full(3, 2.0), "a": np.full(3, 3.0)}, "n": [np.full(1, 4.0)]}
    dst = {"weight": {"a": np.zeros(3), "b": np.zeros(3)}, "n": [np.zeros(1)], "bias": np.zeros(2)}
    ab.copy(src, dst)
    assert dst["weight"]["a"].tolist() == [3.0] * 3 and dst["weight"]["b"].tolist() == [2.0] * 3
    assert dst["bias"].tolist() == [1.0, 1.0] and dst["n"][0].tolist() == [4.0]
    src["weight"]["a"] = np.ones(4)  # a failing pair is named by its key on both sides
    with pytest.raises(ab.ArrayBridgeError, match=r"src\['weight'\]\['a'\] -> dst\['weight'\]\['a'\]: source shape"):
        ab.copy(src, dst)
    assert dst["bias"].tolist() == [1.0, 1.0]


def test_copy_refuses_structures_that_differ_and_moves_nothing():
    dst = [np.zeros(4), np.zeros(3)]
    with pytest.raises(ValueError, match=r"^copy: the keys of src differ from dst's: src lacks \['x'\], and dst "
                                         r"lacks \['a'\]$"):
        ab.copy({"a": np.ones(4)}, {"x": np.zeros(4)})
    with pytest.raises(ValueError, match=r"^copy: the keys of src differ from dst's: src lacks \['x'\]$"):
        ab.copy({"a": np.ones(4)}, {"a": np.zeros(4), "x": np.zeros(4)})  # no "and dst lacks []"
    with pytest.raises(ValueError, match=r"src\[1\] is a list of 1 item but dst there is an array \(a ndarray\)"):
        ab.copy([np.ones(4), [np.ones(3)]], dst)
    with pytest.raises(ValueError, match=r"^copy: src is a list of 1 item but dst there is an array \(a Tensor\)"):
        ab.copy([np.ones(4)], ab.to_device(np.zeros(4), "cpu"))
    with pytest.raises(ValueError, match=r"src\['a'\] is a float but dst there is a list of 1 item"):
        ab.copy({"a": 1.5}, {"a": [np.zeros(2)]})
    endless = [np.ones(4)]
    endless.append(endless)  # no end to walk: said, not a RecursionError
    for call in (lambda: ab.copy(endless, endless), lambda: ab.to_device(endless, "cpu"),
                 lambda: ab.convert.convert_memory(endless, "numpy", "numpy", None)):
        with pytest.raises(ValueError, match="a structure that contains itself .* has no end to walk"):
            call()
    with pytest.raises(ab.ArrayBridgeError, match=r"src\[1\] -> dst\[1\]: source shape \[2\] differs"):
        ab.copy([np.ones(4), np.ones(2)], dst)
    assert not dst[0].any()  # pair 0 did not run either
    many = [np.zeros(2) for _ in range(12)]
    many[11].setflags(write=False)
    with pytest.raises(ab.DLPackError, match=r"dst\[11\] is marked READ_ONLY"):  # its place, two digits
        ab.copy([np.ones(2)] * 12, many)
    assert not any(d.any() for d in many)


def test_convert_memory_of_a_structure():
    data = {"x": np.arange(3.0), "y": [np.ones(2, np.float32)]}
    out = ab.convert.convert_memory(data, "numpy", "numpy", gpu_id=None)
    assert type(out) is dict and type(out["y"]) is list
    np.testing.assert_array_equal(out["x"], data["x"])


def test_each_batch_result_reports_its_own_cast_packing_and_bytes():
    """A newcomer's trial: results of to_device_many (and of a structure's to_device)
    said cast=False, packed=False, bytes_moved=0 for float32 -> float16 moves of a
    strided source; each now says what its own to_device's report would."""
    a = np.arange(6, dtype=np.float32)
    for device in ("cpu", "opencl:0"):
        alone = [ab.to_device(x, device, dtype="float16").report for x in (a, a[::-1])]
        many = [t.report for t in ab.to_device_many([a, a[::-1]], device, dtype="float16")]
        assert [(r.cast, r.packed, r.bytes_moved) for r in many] == [(r.cast, r.packed, r.bytes_moved) for r in alone]
        assert [(r.cast, r.packed, r.bytes_moved) for r in many] == [(True, False, 12), (True, True, 12)], many
    views = ab.to_device({"w": a, "b": a[::-1]}, "cpu")
    assert [(t.report.path, t.report.cast, t.report.packed, t.report.bytes_moved) for t in views.values()] == \
        [("zero_copy", False, False, 0)] * 2
