"""PyTorch converted exactly: what its exchange table exports without checking (conj
and neg bits, autograd) is vetted first (python/arraybridge/_core/torch.c), what DLPack
cannot describe is refused in one line of our family, and read-only data reaches
torch, which has no read-only tensors, as a copy."""
import numpy as np
import pytest

import arraybridge as ab
from handmade_dlpack import OnlyDLPack  # a tensor's own __dlpack__: torch's own checks, not its table

torch = pytest.importorskip("torch", reason="PyTorch is installed by `make test`; run it through make")


def test_a_conj_view_leaves_with_the_values_it_shows():
    c = torch.tensor([1 + 2j, -3 - 4j]).conj()
    assert c.is_conj()
    for moved in (ab.to_device(c, "cpu"), ab.to_device(c, "opencl:0").to("cpu"), ab.from_dlpack(c)):
        np.testing.assert_array_equal(np.from_dlpack(moved), [1 - 2j, -3 + 4j])
    np.testing.assert_array_equal(ab.convert.convert_memory(c, "torch", "numpy", gpu_id=None), [1 - 2j, -3 + 4j])
    with pytest.raises(ab.DLPackError, match="conjugate view .* copy=False forbids") as error:
        ab.to_device(c, "cpu", copy=False)
    assert isinstance(error.value, BufferError) and "\n" not in str(error.value)
    with pytest.raises(BufferError):  # torch's own export refuses it too
        ab.to_device(OnlyDLPack(c), "cpu")


def test_a_neg_view_leaves_with_its_signs():
    n = torch.tensor([1.0, -2.0])._neg_view()
    assert n.is_neg()
    np.testing.assert_array_equal(np.from_dlpack(ab.to_device(n, "cpu")), [-1.0, 2.0])
    with pytest.raises(ab.DLPackError, match="negative view"):
        ab.from_dlpack(n, copy=False)
    both = torch.tensor([1 + 1j])._neg_view().conj()  # both bits: -(1 + 1j) conjugated
    np.testing.assert_array_equal(np.from_dlpack(ab.to_device(both, "cpu")), [-1 + 1j])


def test_the_imaginary_part_of_a_conj_view_is_real_and_keeps_its_sign():
    # A real tensor with the negative bit, by public API: its memory holds +2, it shows
    # -2. Only complex tensors can carry the conjugate bit, so the import asks real
    # tensors for their negative bit alone; this one must still be caught, alone and in
    # a batch beside plain and conjugate tensors.
    imag = torch.tensor([1 + 2j, 3 - 4j]).conj().imag
    assert imag.dtype == torch.float32 and imag.is_neg() and not imag.is_conj()
    np.testing.assert_array_equal(np.from_dlpack(ab.to_device(imag, "cpu")), [-2.0, 4.0])
    plain, conj = torch.tensor([5.0, 6.0]), torch.tensor([1 + 1j]).conj()
    moved = ab.to_device([plain, imag, conj], "opencl:0")
    for got, want in zip(moved, ([5.0, 6.0], [-2.0, 4.0], [1 - 1j])):
        np.testing.assert_array_equal(np.from_dlpack(got.to("cpu")), want)
    with pytest.raises(ab.DLPackError, match="negative view"):
        ab.to_device(imag, "cpu", copy=False)


def test_writes_into_conj_or_neg_views_are_refused_and_torch_is_named():
    base = torch.zeros(1, dtype=torch.complex64)
    d = base.conj()
    with pytest.raises(ab.DLPackError, match=r"dst is a conjugate view .*dst.copy_\(torch.from_dlpack\(src\)\)"):
        ab.copy(np.array([1 + 2j], np.complex64), d)
    assert base[0] == 0  # nothing was written
    d.copy_(torch.from_dlpack(np.array([1 + 2j], np.complex64)))  # the way out the message names
    assert d[0] == 1 + 2j
    with pytest.raises(ab.DLPackError, match="negative view"):
        ab.copy(np.ones(2, np.float32), torch.zeros(2)._neg_view())


def test_autograd_is_respected():
    w = torch.zeros(2, requires_grad=True)
    view = ab.to_device(w, "cpu")
    assert view.read_only and view.report.path == "zero_copy"
    alias = ab.convert.convert_memory(w, "torch", "numpy", gpu_id=None)
    assert not alias.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        alias[0] = 1.0
    assert not ab.to_device(w, "cpu", copy=True).read_only  # a copy is the caller's
    with pytest.raises(ab.DLPackError, match=r"dst requires grad.*dst.detach\(\)"):
        ab.copy(np.ones(2, np.float32), w)
    np.testing.assert_array_equal(w.detach().numpy(), [0.0, 0.0])
    ab.copy(np.ones(2, np.float32), w.detach())  # the way out: torch's own no-grad alias
    np.testing.assert_array_equal(w.detach().numpy(), [1.0, 1.0])
    y = (w * 2).sum()  # autograd still works on the leaf
    y.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 2.0])


@pytest.mark.parametrize("make, words", [
    (lambda: torch.zeros(3).to_sparse(), "its layout is torch.sparse_coo"),
    (lambda: torch.zeros(2, 2).to_sparse_csr(), "its layout is torch.sparse_csr"),
    (lambda: torch.quantize_per_tensor(torch.zeros(3), 0.1, 0, torch.quint8), "it is quantized (torch.quint8)"),
    (lambda: torch.zeros(3, device="meta"), "it is on the meta device"),
    (lambda: torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)]), "it is a nested tensor"),
])
def test_what_dlpack_cannot_describe_is_one_line_of_ours(make, words):
    tensor = make()
    with pytest.raises(ab.DLPackError) as error:
        ab.to_device(tensor, "cpu")
    message = str(error.value)
    assert words in message and "\n" not in message and "frame #" not in message, message
    assert error.value.__context__ is None and error.value.__cause__ is None  # no backtrace hides behind it
    with pytest.raises(ab.MemoryConversionError, match=words.replace("(", r"\(").replace(")", r"\)")) as error:
        ab.convert.convert_memory(tensor, "torch", "numpy", gpu_id=None)
    assert "\n" not in str(error.value)


def test_read_only_data_reaches_torch_as_a_copy():
    ro = np.arange(3.0)
    ro.flags.writeable = False
    t = ab.convert.convert_memory(ro, "numpy", "torch", gpu_id=None)
    t[0] = 5.0
    np.testing.assert_array_equal(ro, [0.0, 1.0, 2.0])
    writable = np.arange(3.0)
    shared = ab.convert.convert_memory(writable, "numpy", "torch", gpu_id=None)  # writable data stays zero-copy
    shared[0] = 7.0
    assert writable[0] == 7.0


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                                   torch.uint16, torch.uint32, torch.uint64, torch.float16, torch.bfloat16,
                                   torch.float32, torch.float64, torch.complex32, torch.complex64, torch.complex128,
                                   torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz,
                                   torch.float8_e5m2fnuz, torch.float8_e8m0fnu, torch.float4_e2m1fn_x2],
                         ids=str)
def test_every_whole_byte_dtype_goes_there_and_back(dtype):
    raw = torch.arange(24, dtype=torch.uint8).reshape(4, 6)
    raw = raw % 2 if dtype == torch.bool else raw  # bool bytes other than 0 and 1 are not bools
    source = raw.view(dtype) if dtype.itemsize == 1 else torch.arange(12).reshape(4, 3).to(dtype)
    for device in ("cpu", "opencl:0"):
        there = ab.to_device(source.t(), device, copy=True)  # strided on the way
        back = torch.from_dlpack(ab.to_device(there, "cpu"))
        assert back.dtype == dtype and back.shape == source.t().shape
        assert torch.equal(back.view(torch.uint8), source.t().contiguous().view(torch.uint8))


def test_ipc_shares_no_lazy_bits_and_no_read_only_memory():
    with pytest.raises(ab.DLPackError, match="conjugate view .* cannot be shared with another process"):
        ab.ipc_handle(torch.tensor([1 + 2j]).conj())
    ro = np.arange(4.0)
    ro.flags.writeable = False
    with pytest.raises(BufferError, match="an IPC handle opens its memory writable in the other process"):
        ab.ipc_handle(ro)
