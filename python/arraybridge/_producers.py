"""What other frameworks' producers are known to do, asked once per type by the C
import (_core): whose arrays are immutable (what we import from them is read-only),
whose own DLPack export can abort the process (vetted before it is asked), and
PyTorch's lazy bits and autograd (checked in _core/torch.c, refused in words here)."""
import importlib
import sys

from ._errors import DLPackError

IMMUTABLE = 1  # _core's PRODUCER_IMMUTABLE
VETTED = 2     # _core's PRODUCER_VETTED
TORCH = 4      # _core's PRODUCER_TORCH
NDARRAY = 8    # _core's PRODUCER_NDARRAY
HOST_BUFFER = 16  # _core's PRODUCER_HOST_BUFFER

_IMMUTABLE_ROOTS = frozenset({"jax", "jaxlib", "tensorflow"})
# Frameworks whose arrays in host memory give the buffer protocol, read in place of their
# slower __dlpack__ (JAX: for one CPU shard only; anything else goes through __dlpack__).
_HOST_BUFFER_ROOTS = frozenset({"jax", "jaxlib"})

# TensorFlow dtypes that hold no numbers: TensorFlow's own export aborts the process
# on them (rc 134), so they are refused before it is asked.
_TENSORFLOW_NOT_NUMBERS = frozenset({"string", "resource", "variant"})
# Quantized integers: DLPack has no dtype for them (TensorFlow's to_dlpack raised its own error).
_TENSORFLOW_QUANTIZED = frozenset({"qint8", "quint8", "qint16", "quint16", "qint32"})
# TensorFlow's composite tensors (no one dense buffer), and how to get a dense tensor of each.
_TENSORFLOW_COMPOSITES = {"RaggedTensor": "x.to_tensor()", "SparseTensor": "tf.sparse.to_dense(x)",
                          "IndexedSlices": "tf.convert_to_tensor(x)"}


def producer_traits(cls):
    """IMMUTABLE, VETTED, TORCH and HOST_BUFFER bits for arrays of `cls` (or of a subclass
    of theirs), and NDARRAY for numpy.ndarray itself (a subclass may change what its data means)."""
    roots = {base.__module__.partition(".")[0] for base in cls.__mro__}
    read_only_wrapper = "torch" in roots and _is_read_only_wrapper(cls)
    vetted = "tensorflow" in roots or _is_masked(cls) or read_only_wrapper
    return ((IMMUTABLE if roots & _IMMUTABLE_ROOTS or read_only_wrapper else 0) | (VETTED if vetted else 0) |
            (TORCH if "torch" in roots and _is_torch_tensor(cls) and not read_only_wrapper else 0) |
            (NDARRAY if _is_ndarray(cls) else 0) | (HOST_BUFFER if roots & _HOST_BUFFER_ROOTS else 0))


def _is_torch_tensor(cls):
    """A torch.Tensor (a Parameter too), not another of torch's objects (a Module, a
    dtype, a Size): only a tensor has the lazy bits and autograd that _core vets."""
    torch = sys.modules.get("torch")
    return torch is not None and issubclass(cls, torch.Tensor)


def _is_read_only_wrapper(cls):
    """torch.utils.dlpack.ReadOnlyTensorWrapper (torch 2.15): export-only, every torch op
    on it raises, so torch.c's vet cannot ask it; its own __dlpack__ refuses a conj bit
    and autograd's tensors (vet_producer asks the neg bit) and sets READ_ONLY (its
    exchange table exports a conjugate view's memory as it is)."""
    dlpack = sys.modules.get("torch.utils.dlpack")
    wrapper = getattr(dlpack, "ReadOnlyTensorWrapper", None)
    return wrapper is not None and issubclass(cls, wrapper)


def _is_masked(cls):
    """A NumPy masked array: its __dlpack__ exports the data and drops the mask."""
    ma = sys.modules.get("numpy.ma")
    return ma is not None and issubclass(cls, ma.MaskedArray)


def _is_ndarray(cls):
    """numpy.ndarray itself, from NumPy 2 (whose __dlpack__ the buffer path matches:
    NumPy 1 exports legacy capsules only, and refuses read-only arrays)."""
    numpy = sys.modules.get("numpy")
    if numpy is None or cls is not getattr(numpy, "ndarray", None):
        return False
    major = getattr(numpy, "__version__", "0").partition(".")[0]
    return major.isdigit() and int(major) >= 2


_TENSORFLOW = {}  # what vet_producer looked up once: "module", "refused", and per type what it is


def _tensorflow_kind(cls):
    """What vet_producer does with objects of `cls`: "refuse" (ragged, sparse, indexed slices), "read"
    (a variable: its value), "capsule" (a tensor without __dlpack__, TensorFlow before
    2.15) or "tensor"; found once per type (TensorFlow's isinstance checks cost a
    microsecond)."""
    kind = _TENSORFLOW.get(cls)
    if kind is None:
        tf = _TENSORFLOW["module"]
        composites = tuple(getattr(tf, name) for name in _TENSORFLOW_COMPOSITES)
        kind = ("refuse" if issubclass(cls, composites) else
                "read" if issubclass(cls, tf.Variable) else
                "tensor" if hasattr(cls, "__dlpack__") else "capsule")
        _TENSORFLOW[cls] = kind
    return kind


def vet_producer(data):
    """What to import in place of a TensorFlow object: a variable's value, the legacy
    capsule of a tensor without __dlpack__ (TensorFlow before 2.15), or a DLPackError
    for what DLPack cannot carry (a NumPy masked array's mask among it); and of torch's
    read-only wrapper, its own read-only export."""
    if _is_read_only_wrapper(type(data)):
        torch = sys.modules["torch"]
        with torch._C.DisableTorchFunctionSubclass():  # its own ops raise; the bit is asked of the tensor under it
            negative = torch.Tensor.is_neg(data)
        if negative:  # its __dlpack__ refuses a conj bit, not this one
            raise BufferError("a negative view (its neg bit is set): its memory holds the negatives of its values; "
                              "wrap x.resolve_neg()")
        return data.__dlpack__(max_version=(1, 0))  # read-only: torch's export-only wrapper sets the flag
    if _is_masked(type(data)):
        raise DLPackError("arraybridge: a NumPy masked array's mask has no place in DLPack, so its masked elements "
                          "would pass as numbers; pass x.filled(value) for the values, or x.data for the data as "
                          "it is (JAX refuses it too)")
    if "module" not in _TENSORFLOW:
        tf = importlib.import_module("tensorflow")
        _TENSORFLOW["module"] = tf
        # Refused dtypes by the id of TensorFlow's one DType object of each (a tensor's
        # dtype is that object): one lookup per tensor.
        _TENSORFLOW["refused"] = {
            **{id(getattr(tf, name)): f"arraybridge: TensorFlow {name} tensors hold no numbers that DLPack can carry"
               for name in _TENSORFLOW_NOT_NUMBERS},
            **{id(getattr(tf, name)): f"arraybridge: TensorFlow {name} tensors are quantized integers, which DLPack "
               "has no dtype for; dequantize them (tf.quantization.dequantize) or tf.cast them first"
               for name in _TENSORFLOW_QUANTIZED}}
    kind = _tensorflow_kind(type(data))
    if kind == "refuse":
        tf = _TENSORFLOW["module"]
        dense = next(way for name, way in _TENSORFLOW_COMPOSITES.items() if isinstance(data, getattr(tf, name)))
        raise DLPackError(f"arraybridge: a tf.{type(data).__name__} has no one dense buffer for DLPack; pass "
                          f"{dense} instead")
    if kind == "read":
        data = data.read_value()  # a tensor of the variable's current value
        kind = _tensorflow_kind(type(data))
    refused = _TENSORFLOW["refused"].get(id(getattr(data, "dtype", None)))
    if refused:
        raise DLPackError(refused)
    if kind == "capsule":
        return _TENSORFLOW["module"].experimental.dlpack.to_dlpack(data)
    return data


_BITS = {"conj": ("a conjugate view (its conj bit is set)", "the conjugates of its values", "resolve_conj"),
         "neg": ("a negative view (its neg bit is set)", "the negatives of its values", "resolve_neg")}


def refusal(tensor, role, problem, detail):
    """The DLPackError (a BufferError, one line) refusing a producer's array in `role`:
    "export" or "export into" (its producer's export failed, of a source or a
    destination; detail is the first line of why), or for a
    torch tensor problem "conj" or "neg" (detail "destination", "no copy" or "shared"),
    "grad" (as a destination), "inference" (a write into an inference tensor outside
    inference mode) or "storageless" (its export has elements and no data: a wrapper
    subclass)."""
    destination = problem == "export into"  # how to get another array is no help there: it is the caller's
    problem = "export" if destination else problem
    if problem == "export" and (not _is_torch_tensor(type(tensor)) or _is_read_only_wrapper(type(tensor))):
        return DLPackError(f"arraybridge: {role} ({_described(tensor)}) cannot go through DLPack: "
                           f"{detail}{'' if destination else _export_hint(tensor, role)}")
    if problem in _BITS:
        what, holds, resolve = _BITS[problem]
        if detail == "destination":
            return DLPackError(f"arraybridge: {role} is {what}: its memory holds {holds}, so a write there would "
                               f"store other values than those given; let torch write it ({role}.copy_(torch."
                               f"from_dlpack(src))), which resolves the bit")
        if detail == "shared":
            return DLPackError(f"arraybridge: {role} is {what}: its memory holds {holds}, so it cannot be shared with "
                               f"another process as it is; share the copy that resolves it ({role}.{resolve}())")
        return DLPackError(f"arraybridge: {role} is {what}: its memory holds {holds}, so it cannot be shared as it "
                           f"is, and copy=False forbids the copy that resolves it ({role}.{resolve}())")
    if problem == "grad":
        return DLPackError(f"arraybridge: {role} requires grad: a write into it would go behind autograd's back; "
                           f"write into {role}.detach(), or let torch write it under torch.no_grad() "
                           f"({role}.copy_(torch.from_dlpack(src)))")
    if problem == "storageless":
        return DLPackError(f"arraybridge: {role} is a {type(tensor).__name__} whose elements have no storage DLPack "
                           "can point at (a wrapper subclass, or a fake tensor): pass the tensors it wraps, or a "
                           "tensor made from its values")
    if problem == "inference":
        return DLPackError(f"arraybridge: {role} is (or views) a torch tensor made under torch.inference_mode(), which "
                           "torch refuses to update in place outside inference mode; write it inside "
                           f"`with torch.inference_mode():`, or write into {role}.clone() (made outside inference mode, a clone is "
                           "a normal tensor)")
    return DLPackError(f"arraybridge: {role} cannot go through DLPack: {_torch_problem(tensor) or detail}")


def _described(array):
    """"a numpy.ndarray of dtype >i4": an array's type, and its dtype where it has one."""
    cls = type(array)
    dtype = _dtype_of(array)
    return f"a {cls.__module__}.{cls.__qualname__}" + ("" if dtype is None else f" of dtype {dtype}")


def _dtype_of(array):
    """Its dtype, or None where it has none it will say (torch's read-only wrapper raises)."""
    try:
        return getattr(array, "dtype", None)
    except Exception:  # noqa: BLE001 - only words for a message are at stake
        return None


def _export_hint(array, role):
    """How to get an array DLPack carries, where a known export refusal has one."""
    dtype = _dtype_of(array)
    if getattr(dtype, "isnative", True) is False:
        return f"; pass {role}.astype({role}.dtype.newbyteorder('=')) for its values in this machine's byte order"
    if str(dtype) in ("int4", "uint4", "int2", "uint2"):
        return f"; pass {role}.astype('{'u' if str(dtype)[0] == 'u' else ''}int8') for its values"
    if str(dtype).startswith(("float4_", "float6_")):  # ml_dtypes' types, kept a byte per element
        return f"; pass {role}.astype('float32') for its values"
    return ""


def _torch_problem(tensor):
    """What DLPack cannot describe about a torch tensor, in words, or None."""
    torch = importlib.import_module("torch")
    if tensor.layout != torch.strided:
        return f"its layout is {tensor.layout}, and DLPack describes strided tensors only (use .to_dense())"
    if tensor.is_quantized:
        return f"it is quantized ({tensor.dtype}), and DLPack has no quantized types (use .dequantize())"
    if tensor.is_meta:
        return "it is on the meta device, which holds no data"
    if tensor.is_nested:
        return "it is a nested tensor, which has no one strided buffer (use .to_padded_tensor(0))"
    return None
