"""Which casts a copy makes: casting= with NumPy's names, judged as NumPy judges them.

A copy into an existing array casts by NumPy's copyto rule ("same_kind") unless asked
otherwise, so complex into float, float into an integer, signed into unsigned and
anything but bool into bool raise CastingError and write nothing; to_device's dtype=
is asked for, so it casts as astype does ("unsafe") unless asked otherwise. NumPy
itself is the oracle: np.can_cast for the rule, np.copyto for the values."""
import numpy as np
import pytest

import arraybridge as ab

DTYPES = ["bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64", "float16", "float32",
          "float64", "complex64", "complex128"]
CASTINGS = ["no", "equiv", "safe", "same_kind", "unsafe"]
# NumPy counts these as safe though float64 has 53 bits of digits for 64-bit integers;
# ours is "holds every value" (2**53 + 1 does not survive), a narrower "safe".
NOT_SAFE_HERE = {(a, b) for a in ("int64", "uint64") for b in ("float64", "complex128")}
# Values every dtype holds some of: fractions, negatives, and values past the narrow types' ranges.
SAMPLE = np.array([0, 1, -1, 2.5, -130.75, 300, 70000, 2**40], dtype=np.float64)


def sample(dtype):
    with np.errstate(all="ignore"):
        return SAMPLE.astype(dtype) if dtype != "bool" else SAMPLE.astype(bool)


def test_every_pair_and_rule_is_numpys_can_cast_and_a_refused_copy_writes_nothing():
    wrong = []
    for src_dtype in DTYPES:
        src = sample(src_dtype)
        for dst_dtype in DTYPES:
            for casting in CASTINGS + [None]:
                dst = np.full(src.shape, 7, dtype=dst_dtype)
                before = dst.copy()
                numpy_allows = np.can_cast(src_dtype, dst_dtype, casting or "same_kind") and not (
                    casting == "safe" and (src_dtype, dst_dtype) in NOT_SAFE_HERE)
                try:
                    ab.copy(src, dst, casting=casting)
                    made = True
                except ab.CastingError as error:
                    made = False
                    if not np.array_equal(dst, before):
                        wrong.append(f"{src_dtype} -> {dst_dtype} ({casting}): refused, and wrote")
                    assert isinstance(error, TypeError) and error.status_name == "ABR_ERR_CASTING"
                    assert f"refuses {src_dtype} -> {dst_dtype}" in str(error), str(error)
                if made != numpy_allows:
                    wrong.append(f"{src_dtype} -> {dst_dtype} ({casting}): ours {made}, NumPy's {numpy_allows}")
                elif made and casting != "unsafe":  # values NumPy defines for every input: its own copyto's
                    expected = np.full(src.shape, 7, dtype=dst_dtype)
                    with np.errstate(all="ignore"):
                        np.copyto(expected, src, casting=casting or "same_kind")
                    if not np.array_equal(dst, expected, equal_nan=dst.dtype.kind in "fc"):
                        wrong.append(f"{src_dtype} -> {dst_dtype} ({casting}): {dst} is not NumPy's {expected}")
    assert wrong == []


def test_a_copy_refuses_a_cast_across_kinds_by_default_and_names_the_way_out():
    z = np.array([1.5 + 2j, -3 + 0.5j])
    real = np.zeros(2)
    with pytest.raises(ab.CastingError) as error:
        ab.copy(z, real)
    assert str(error.value) == (
        'copy: casting "same_kind" (a copy\'s default, as NumPy\'s copyto) refuses complex128 -> float64 (the '
        'imaginary part is dropped); ask for casting "unsafe" to convert anyway')
    assert (real == 0).all()
    assert ab.copy(z, real, casting="unsafe") is None
    np.testing.assert_array_equal(real, [1.5, -3])
    # Within a kind a copy narrows, as NumPy's copyto does: float64 into float32 rounds.
    narrow = np.zeros(2, np.float32)
    ab.copy(np.array([0.1, 1e300]), narrow)
    np.testing.assert_array_equal(narrow, np.array([0.1, np.inf], np.float32))
    with pytest.raises(ab.CastingError, match=r'casting "safe" refuses float64 -> float32 \(values round'):
        ab.copy(np.array([0.1]), narrow[:1], casting="safe")
    # "safe" means every value survives: int64 into float64 (which NumPy calls safe) does not.
    with pytest.raises(ab.CastingError, match=r"refuses int64 -> float64 \(integers past the float's digits round\)"):
        ab.copy(np.array([2**53 + 1]), np.zeros(1), casting="safe")


@pytest.mark.parametrize("bad", ["Unsafe", "", 1, True])
def test_an_unknown_casting_is_a_value_error_naming_numpys_names(bad):
    with pytest.raises(ValueError, match=r'copy: casting must be None, "no", "equiv", "safe", "same_kind" or '
                                         r'"unsafe" \(NumPy\'s names\), not '):
        ab.copy(np.ones(2), np.zeros(2), casting=bad)


def test_to_device_casts_as_astype_unless_asked_otherwise():
    z = np.array([1.5 + 2j])
    np.testing.assert_array_equal(np.from_dlpack(ab.to_device(z, "cpu", dtype="float64")), [1.5])
    with pytest.raises(ab.CastingError, match=r'to_device\(cpu\): casting "same_kind" refuses complex128 -> float64'):
        ab.to_device(z, "cpu", dtype="float64", casting="same_kind")
    with pytest.raises(ab.CastingError, match='casting "no" refuses float64 -> float32 \\(the dtypes differ\\)'):
        ab.to_device(np.ones(2), "cpu", dtype="float32", casting="no")
    # A batch takes it too, and names the array.
    with pytest.raises(ab.CastingError, match=r"x\['w'\]\[1\]: casting \"safe\" refuses int64 -> float32"):
        ab.to_device({"w": [np.ones(2, np.int8), np.ones(2, np.int64)]}, "cpu", dtype="float32", casting="safe")


def test_a_structure_and_copy_many_cast_by_the_same_rule_and_a_refused_pair_moves_nothing():
    src = {"w": np.array([1.25, 2.5]), "b": np.array([3.0])}
    dst = {"w": np.zeros(2), "b": np.zeros(1, np.int32)}
    with pytest.raises(ab.CastingError, match=r"copy: src\['b'\] -> dst\['b'\]: casting \"same_kind\""):
        ab.copy(src, dst)
    assert (dst["w"] == 0).all() and (dst["b"] == 0).all()
    with pytest.raises(ab.DLPackError, match=r"copy: src\['w'\] -> dst\['w'\]: destination: zero stride"):
        ab.copy(src, {"w": np.lib.stride_tricks.as_strided(np.zeros(1), (2,), (0,)), "b": dst["b"]})
    ab.copy(src, dst, casting="unsafe")
    np.testing.assert_array_equal(dst["w"], [1.25, 2.5])
    assert dst["b"][0] == 3
    ints = [np.zeros(2, np.int64)]
    with pytest.raises(ab.CastingError, match="copy: pair 0: "):
        ab.copy_many([np.array([1.5, 2.5])], ints)
    ab.copy_many([np.array([1.5, 2.5])], ints, casting="unsafe")
    np.testing.assert_array_equal(ints[0], [1, 2])


def test_a_copy_onto_a_device_casts_by_the_same_rule():
    on_device = ab.to_device(np.zeros(3, np.int32), "opencl:0")
    with pytest.raises(ab.CastingError, match="refuses float64 -> int32"):
        ab.copy(np.array([1.5, 2.5, -3.5]), on_device)
    np.testing.assert_array_equal(np.from_dlpack(ab.to_device(on_device, "cpu")), [0, 0, 0])
    ab.copy(np.array([1.5, 2.5, -3.5]), on_device, casting="unsafe")
    np.testing.assert_array_equal(np.from_dlpack(ab.to_device(on_device, "cpu")), [1, 2, -3])


def test_a_torch_destination_is_judged_as_numpy_judges_it():
    torch = pytest.importorskip("torch", reason="PyTorch is installed by `make test`; run it through make")
    weights = torch.zeros(2, dtype=torch.bfloat16)
    ab.copy(np.array([0.5, 3.0], np.float32), weights)  # float32 into bfloat16: within a kind
    assert weights.tolist() == [0.5, 3.0]
    counts = torch.zeros(2, dtype=torch.int64)
    with pytest.raises(ab.CastingError, match="refuses float32 -> int64"):
        ab.copy(np.array([0.5, 3.0], np.float32), counts)
    assert counts.tolist() == [0, 0]
