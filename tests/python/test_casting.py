"""Which casts a copy makes: casting= with NumPy's names, judged as NumPy judges them.

A copy into an existing array casts by NumPy's copyto rule ("same_kind") unless asked
otherwise, so complex into float, float into an integer, signed into unsigned and
anything but bool into bool raise CastingError and write nothing; to_device's dtype=
is asked for, so it casts as astype does ("unsafe") unless asked otherwise. NumPy
itself is the oracle: np.can_cast for the rule, np.copyto for the values."""
import ctypes
import math
import os
import pathlib
import subprocess
import sys
import textwrap

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


def _near_ties(ulps):
    """Doubles a hair either side of each rounding tie between `ulps` (a format's
    neighbouring values, as float64) and on it: where a float32 in between rounds twice."""
    ties = (ulps[:-1] + ulps[1:]) / 2
    nudged = np.concatenate([ties, ties * (1 + 2.0**-40), ties * (1 - 2.0**-40), ties + 2.0**-60])
    return np.concatenate([nudged, -nudged])


def _bfloat16_bits(values):
    """bfloat16 of each double, rounded once to nearest even (8 significant bits), for
    values in its normal range: the oracle (torch, like ml_dtypes, rounds twice)."""
    rounded = [math.ldexp(round(m * 256), e - 8) for m, e in map(math.frexp, values)]
    return (np.array(rounded, np.float32).view(np.uint32) >> 16).astype(np.uint16)


@pytest.mark.parametrize("device", ["cpu", "opencl:0"])
def test_float64_narrows_to_float16_and_bfloat16_rounding_once_as_astype(device):
    """Through a float32 rounded to nearest, 1 + 2**-11 + 2**-40 became 1.0 (NumPy:
    1.001), 612.7499994 became 613.0 and 2**-25 + 2**-60 became 0: rounded twice."""
    halves = np.arange(0, 0x7C00, 29, dtype=np.uint16).view(np.float16).astype(np.float64)  # subnormals too
    values = np.concatenate([_near_ties(halves), [1 + 2.0**-11 + 2.0**-40, 612.7499994, 2.0**-25 + 2.0**-60]])
    expected = values.astype(np.float16).view(np.uint16)
    into = ab.to_device(np.zeros(values.size, np.float16), device)
    ab.copy(values, into, casting="same_kind")  # cast on the way (by the host)
    there = ab.to_device(values, device)
    for got in (ab.to_device(values, device, dtype="float16"), into, ab.to_device(there, device, dtype="float16")):
        np.testing.assert_array_equal(np.from_dlpack(ab.to_device(got, "cpu")).view(np.uint16), expected)
    normal = (np.arange(0x0C00, 0x7200, 23, dtype=np.uint32) << 16).view(np.float32).astype(np.float64)  # 2**-103..2**101
    values = np.concatenate([_near_ties(normal), [1 + 2.0**-8 + 2.0**-40]])
    for got in (ab.to_device(values, device, dtype="bfloat16"),  # cast where the data is, and where it goes
                ab.to_device(ab.to_device(values, device), device, dtype="bfloat16")):
        got = ab.to_device(got, "cpu")
        bits = np.ctypeslib.as_array((ctypes.c_uint16 * values.size).from_address(got.data_ptr + got.byte_offset))
        np.testing.assert_array_equal(bits, _bfloat16_bits(values))  # NumPy has no bfloat16: its bits


def _rounded(x, bits):
    """The integer x rounded once to `bits` significant bits, ties to even: exact, in Python ints."""
    shift = abs(x).bit_length() - bits
    if shift <= 0:
        return x
    q, r = divmod(abs(x), 1 << shift)
    q += r > (1 << (shift - 1)) or (r == 1 << (shift - 1) and q & 1)
    return (q << shift) * (1 if x >= 0 else -1)


def _integer_ties(top, signed):
    """Integers on, and a hair either side of, the ties of bfloat16 (8 bits) and float32
    (24 bits) for every width up to `top` bits: where a double or a float between rounds first."""
    values = []
    for width in range(9, top + 1):
        for kept in (8, 24):
            if width <= kept:
                continue
            base = (1 << (width - 1)) | (0b1011 << (width - 6))  # a mantissa with bits set
            tie = (base >> (width - kept) << (width - kept)) + (1 << (width - kept - 1))
            values += [tie, tie + 1, tie - 1, tie + (1 << (width - kept - 1)) - 1]
    values = [v for v in values if v < 1 << top]
    return values + [-v for v in values] if signed else values


@pytest.mark.parametrize("dtype", ["int64", "uint64", "int32"])
# On OpenCL: the slow tier (under memcheck, PoCL compiling the programs took 15 s a dtype).
@pytest.mark.parametrize("device", ["cpu", pytest.param("opencl:0", marks=pytest.mark.slow)])
def test_an_integer_narrows_to_bfloat16_and_complex64_rounding_once(device, dtype):
    """Through its double, 2**60 + 2**52 + 1 became 2**60 as bfloat16 (not 2**60 + 2**53),
    and 2**60 + 2**36 + 1 became 2**60 as complex64: rounded twice. An int32 rounded twice
    too, on an OpenCL device without fp64 (its kernel went through a float)."""
    info = np.iinfo(dtype)
    ints = [v for v in _integer_ties(info.bits, info.min < 0) if info.min <= v <= info.max]
    ints += [2**60 + 2**52 + 1, 2**60 + 2**36 + 1, info.max, info.min, 0, 1]
    ints = [v for v in ints if info.min <= v <= info.max]
    values = np.array(ints, dtype)
    bf16 = np.array([float(_rounded(v, 8)) for v in ints], np.float32).view(np.uint32) >> 16
    c64 = np.array([float(_rounded(v, 24)) for v in ints], np.float32)
    there = ab.to_device(values, device)
    for got in (ab.to_device(values, device, dtype="bfloat16"), ab.to_device(there, device, dtype="bfloat16")):
        got = ab.to_device(got, "cpu")
        bits = np.ctypeslib.as_array((ctypes.c_uint16 * values.size).from_address(got.data_ptr + got.byte_offset))
        np.testing.assert_array_equal(bits, bf16.astype(np.uint16))
    if "vgpreload" in os.environ.get("LD_PRELOAD", ""):
        return  # valgrind emulates int64 -> float (cvtsi2ss) through a double: it rounds twice itself
    for got in (ab.to_device(values, device, dtype="complex64"), ab.to_device(there, device, dtype="complex64")):
        got = np.from_dlpack(ab.to_device(got, "cpu"))
        np.testing.assert_array_equal(got.real, c64)
        np.testing.assert_array_equal(got.imag, 0)
    np.testing.assert_array_equal(values.astype(np.complex64).real, c64)  # NumPy agrees: the oracle's check


@pytest.mark.parametrize("source", ["float32", "float64"])
def test_a_nan_into_float16_has_the_same_bits_on_the_host_and_on_opencl(source):
    """OpenCL's vstore_half gave the driver's NaN (PoCL's 0x7fff, sign dropped) where the
    host cast gives its quiet NaN with the sign: which path ran showed in the bits."""
    bits = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FFFFFFF, 0xFF812345], np.uint32)
    with np.errstate(invalid="ignore"):  # NumPy warns of a signalling NaN it quiets
        nans = bits.view(np.float32).astype(source)
    got = {}
    for device in ("cpu", "opencl:0"):  # cast where the data is: by the host, by a kernel
        halves = ab.to_device(ab.to_device(nans, device), device, dtype="float16")
        got[device] = np.from_dlpack(ab.to_device(halves, "cpu")).view(np.uint16)
    np.testing.assert_array_equal(got["cpu"], [0x7E00, 0xFE00, 0x7E00, 0x7E00, 0xFE00])
    np.testing.assert_array_equal(got["opencl:0"], got["cpu"])


NO_FP64 = pathlib.Path(os.environ.get("ARRAYBRIDGE_BUILD", pathlib.Path(__file__).resolve().parents[2] / "build")) \
    / "opencl-no-fp64" / "libopencl-no-fp64.so"


def test_a_device_without_double_precision_refuses_its_float64_casts_before_anything_moves():
    """OpenCL devices without cl_khr_fp64 (Intel Xe and Arc, Apple, Mali) cannot convert
    float64 in their memory. The kernel refused it once the copy had begun, so a batch's
    earlier pairs were written and a torch destination's version bumped for nothing
    refused; the planner now refuses it first, and says where to convert instead.
    PoCL has fp64: it is opened through a library that says it has none."""
    if not NO_FP64.exists():
        pytest.skip(f"the no-fp64 OpenCL library is not built ({NO_FP64}): run make test")
    code = textwrap.dedent("""
        import numpy as np, arraybridge as ab
        x = np.arange(8, dtype=np.float64)
        on_device = ab.to_device(x, "opencl:0")
        said = {d.name: d.double_precision for d in ab.devices()}
        assert said["opencl:0"] is False and said["cpu"] is True, said
        try:
            on_device.to("opencl:0", dtype="float32")
            raise SystemExit("a float64 cast in the device's memory was not refused")
        except ab.ArrayBridgeError as e:
            assert e.status_name == "ABR_ERR_UNSUPPORTED" and "no double precision" in str(e), e
        first_src = ab.to_device(np.arange(8, dtype=np.int32), "opencl:0")
        first_dst = ab.to_device(np.full(8, -1, np.int16), "opencl:0")
        into = ab.to_device(np.zeros(8, np.float32), "opencl:0")
        try:
            ab.copy_many([first_src, on_device], [first_dst, into])
            raise SystemExit("copy_many's float64 cast was not refused")
        except ab.ArrayBridgeError as e:
            assert "pair 1" in str(e) and "no double precision" in str(e), e
        assert (np.from_dlpack(first_dst.to("cpu")) == -1).all(), "the first pair was written"
        # Converted on the host, float64 goes to and from the device as before.
        np.testing.assert_array_equal(np.from_dlpack(ab.to_device(x, "opencl:0", dtype="float32").to("cpu")), x)
        np.testing.assert_array_equal(np.from_dlpack(on_device.to("cpu", dtype="float32")), x)
        print("ok")
    """)
    env = dict(os.environ, ARRAYBRIDGE_OPENCL_LIBRARY=str(NO_FP64))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
