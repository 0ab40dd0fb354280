"""The seed API of the Python project this library grows from: convert_memory,
detect_memory_type and MemoryType over numpy, cupy, torch, tensorflow, jax and
pyclesperanto. Each framework is imported only when a conversion needs it; every
conversion is one planned runtime transfer (zero-copy where the data already is on
the target device), never a hidden host round trip.
"""
import ctypes
import enum
import importlib
import logging
import operator
import os
import sys

from ._errors import ArrayBridgeError, CopyRequiredError, MemoryConversionError
from ._lib import _core, lib
from . import _deprecated, _structure
from ._producers import IMMUTABLE, producer_traits
from ._transfer import copy as copy_into, from_dlpack, to_device

log = logging.getLogger("arraybridge")
_DEBUG = logging.DEBUG


class MemoryType(str, enum.Enum):
    """The array libraries convert_memory names as a source or target type."""

    NUMPY = "numpy"
    CUPY = "cupy"
    TORCH = "torch"
    TENSORFLOW = "tensorflow"
    JAX = "jax"
    PYCLESPERANTO = "pyclesperanto"


# The layouts each framework's DLPack import cannot hold, as to_device's contiguous=:
# JAX takes "Only DLPack tensors with trivial (compact) striding", TensorFlow and
# pyclesperanto nothing but compact row-major either, and PyTorch no negative stride
# (a flipped image, img[..., ::-1]: "Storage size calculation overflowed"). NumPy and
# CuPy hold any strides. The one copy this needs says why in its report.
_LAYOUT_NEEDED = {"jax": True, "tensorflow": True, "pyclesperanto": True, "torch": "nonnegative"}

CPU_MEMORY_TYPES = frozenset({MemoryType.NUMPY})
GPU_MEMORY_TYPES = frozenset(set(MemoryType) - CPU_MEMORY_TYPES)
SUPPORTED_MEMORY_TYPES = frozenset(MemoryType)

# Top-level modules whose classes belong to each framework.
_MODULE_ROOTS = {
    "numpy": MemoryType.NUMPY,
    "cupy": MemoryType.CUPY, "cupy_backends": MemoryType.CUPY,
    "torch": MemoryType.TORCH,
    "tensorflow": MemoryType.TENSORFLOW,
    "jax": MemoryType.JAX, "jaxlib": MemoryType.JAX,
    "pyclesperanto": MemoryType.PYCLESPERANTO, "pyclesperanto_prototype": MemoryType.PYCLESPERANTO,
    # pyclesperanto >= 0.2x: arrays are its backend packages' classes
    "pyclesperanto_opencl": MemoryType.PYCLESPERANTO, "pyclesperanto_cuda": MemoryType.PYCLESPERANTO,
    "pyclesperanto_metal": MemoryType.PYCLESPERANTO,
}


def _is_array(data, found):
    """An array, not another object of its framework (np.dtype('f4') is NumPy's too):
    it exports DLPack, or is a TensorFlow tensor, variable or composite (vetted later)."""
    return hasattr(data, "__dlpack__") or (found is MemoryType.TENSORFLOW and hasattr(data, "dtype")
                                           and hasattr(data, "shape"))


def detect_memory_type(data):
    """The MemoryType of `data`, found from its class or any base class (so subclasses
    defined elsewhere count). Raises ValueError for anything else, other objects of
    those frameworks (a dtype, a device) included."""
    for cls in type(data).__mro__:
        found = _MODULE_ROOTS.get(cls.__module__.partition(".")[0])
        if found is not None and _is_array(data, found):
            return found
    raise ValueError(f"arraybridge: {type(data).__module__}.{type(data).__qualname__} is not an array of "
                     f"{', '.join(m.value for m in MemoryType)}")


def _memory_type(value):
    """The MemoryType named by `value`, or None."""
    try:
        return MemoryType(value.value if isinstance(value, MemoryType) else value)
    except (ValueError, TypeError):
        return None


def _unknown_type(value, role):
    return f"unknown {role} {value!r}; expected one of {', '.join(m.value for m in MemoryType)}"


_MAX_DEVICE_ID = 2**31 - 1  # DLDevice.device_id is an int32


def _gpu_index(gpu_id):
    """gpu_id as an int (Python's, NumPy's or any integer with __index__), or None."""
    if gpu_id is None:
        return None
    if isinstance(gpu_id, bool):
        raise ValueError(f"gpu_id must be None (CPU) or an int >= 0, not {gpu_id!r}")
    try:
        index = operator.index(gpu_id)
    except TypeError:
        raise ValueError(f"gpu_id must be None (CPU) or an int >= 0, not {gpu_id!r}") from None
    if not 0 <= index <= _MAX_DEVICE_ID:
        raise ValueError(f"gpu_id must be None (CPU) or an int from 0 to {_MAX_DEVICE_ID}, not {index}")
    return index


def _target_device(target, gpu_id):
    """The device `target` arrays live on for this gpu_id (None = CPU), as the seed's
    API means it: pyclesperanto's GPUs are OpenCL devices, the other frameworks' CUDA ones."""
    gpu_id = _gpu_index(gpu_id)
    if target is MemoryType.NUMPY:
        if gpu_id not in (None, 0):  # 0 is the default: NumPy memory is host memory
            raise ValueError(f"numpy arrays live on the CPU; gpu_id={gpu_id} names a GPU (pass gpu_id=None)")
        return "cpu"
    if target is MemoryType.PYCLESPERANTO:
        if gpu_id is None:
            raise ValueError("pyclesperanto arrays live on an OpenCL device; gpu_id=None asks for the CPU")
        return f"opencl:{gpu_id}"
    if gpu_id is None:
        if target is MemoryType.CUPY:
            raise ValueError("CuPy arrays live on a GPU; gpu_id=None asks for the CPU")
        return "cpu"
    return f"cuda:{gpu_id}"


# With jax_enable_x64 off (JAX's default) JAX keeps these 32-bit: jnp.from_dlpack,
# jnp.asarray and device_put all change int64 2**40 into 0 and float64 1e300 into inf
# without a word, so a conversion into JAX refuses them instead.
_JAX_X64_DTYPES = frozenset({"int64", "uint64", "float64", "complex128"})


class _NarrowingRefused(ValueError):
    """A target that would narrow the data on import (_check_target_holds)."""


def _check_target_holds(dtype, target, cast="ask for the cast with dtype="):
    """Raises ValueError when `target` would narrow data of `dtype` on import; `cast`
    says how the caller asks for a cast."""
    if target is MemoryType.JAX and dtype in _JAX_X64_DTYPES:
        jax = importlib.import_module("jax")
        if not jax.config.jax_enable_x64:
            raise _NarrowingRefused(f"JAX keeps no {dtype} while jax_enable_x64 is off: it would make these values "
                             "32-bit without a word. Turn it on (jax.config.update('jax_enable_x64', True)), "
                             f"or {cast}, having checked the values fit")


class _ToImmutable:
    """A tensor as a producer for a framework that never writes into what it imports
    (JAX, TensorFlow): exported as the capsule it asks for, a legacy one included,
    when the tensor is read-only; a legacy capsule cannot say so, and they need not know."""

    def __init__(self, tensor):
        self._tensor = tensor

    def __dlpack_device__(self):
        return self._tensor.__dlpack_device__()

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if stream not in (None, -1) or dl_device is not None or copy:
            return self._tensor.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)
        return _core.export(self._tensor, max_version is not None and max_version[0] >= 1, False)


# Frameworks whose arrays cannot be read-only: read-only data reaches them as a copy.
_ALWAYS_WRITABLE = frozenset({MemoryType.TORCH, MemoryType.CUPY})

# Frameworks whose arrays are immutable to their owners: what they import is never
# written, by them or (they assume) by anyone. JAX compiles a jitted function's
# closed-over arrays in as constants, so a JAX array whose memory its source still
# writes would show one function the old values and the next the new. Writable data
# reaches them as a copy, as their own jnp.asarray, device_put and convert_to_tensor
# copy it; only their DLPack imports (jax.dlpack.from_dlpack) alias it, on request.
_IMMUTABLE = frozenset({MemoryType.JAX, MemoryType.TENSORFLOW})


def _numpy_still_writable(array):
    """Whether anyone may still write the memory of NumPy `array`: unless it is
    read-only all the way down to memory nobody writes (bytes, a JAX or TensorFlow
    array's), someone may: a read-only view of a writable array, of a torch tensor
    (t.numpy()), of a bytearray or a file's mapping, and read-only memory NumPy owns
    (its owner may make it writable again)."""
    while True:
        if isinstance(array, memoryview):
            if not array.readonly:
                return True
            array = array.obj
        elif hasattr(array, "flags"):
            if array.flags.writeable:
                return True
            array = array.base
        else:
            break
        if array is None:  # NumPy's own memory (flags.writeable can be set again), or a view without an owner
            return True
    return not isinstance(array, bytes) and not producer_traits(type(array)) & IMMUTABLE


def _always(data):
    return True


_STILL_WRITABLE = {MemoryType.NUMPY: _numpy_still_writable, MemoryType.TORCH: _always, MemoryType.CUPY: _always,
                   MemoryType.PYCLESPERANTO: _always}


def _private_copy(source, target, copy):
    """copy= for the move of data `source` still writes into immutable `target`: True,
    or a refusal where copy=False forbids it."""
    if copy is False:
        raise CopyRequiredError(f"{target.value} arrays are immutable and this {source.value} array's memory can "
                                f"still be written, which would change the {target.value} array; it needs a copy, "
                                f"which copy=False forbids ({target.value}'s DLPack import shares memory on request)")
    return True


# The data alignment a framework's kernels assume of what it imports, and do not check
# at import: TensorFlow's first op on a view 4 bytes past an allocation (a[1:]) aborts
# the process ("Check failed: IsAligned()"). Such data reaches it as a copy (ours are
# 256-byte aligned). JAX copies what it cannot use itself.
_ALIGNMENT = {MemoryType.TENSORFLOW: 64}


_TORCH_DTYPES = []


def _torch_dtypes():
    """Our names of the dtypes torch has ("float4_e2m1fnx2" for torch.float4_e2m1fn_x2)."""
    if not _TORCH_DTYPES:
        torch = importlib.import_module("torch")
        _TORCH_DTYPES.append(frozenset(str(d)[len("torch."):].replace("_x", "x") for d in vars(torch).values()
                                       if isinstance(d, torch.dtype)))
    return _TORCH_DTYPES[0]


_IMPORTERS = {}  # MemoryType -> its framework's import of a Tensor, made once


def _importer(target):
    """The target framework's zero-copy import of a Tensor: its type's C exchange API
    where it has one (PyTorch), else its DLPack importer; looked up once."""
    found = _IMPORTERS.get(target)
    if found is not None:
        return found
    if target is MemoryType.NUMPY:
        found = importlib.import_module("numpy").from_dlpack
    elif target is MemoryType.CUPY:
        found = importlib.import_module("cupy").from_dlpack
    elif target is MemoryType.TORCH:
        torch = importlib.import_module("torch")
        tensor_type, from_dlpack_ = torch.Tensor, torch.from_dlpack

        def found(tensor):
            made = _core.hand_over(tensor, tensor_type)
            return made if made is not None else from_dlpack_(tensor)
    elif target is MemoryType.JAX:
        jnp_from_dlpack = importlib.import_module("jax.numpy").from_dlpack

        def found(tensor):
            return jnp_from_dlpack(_ToImmutable(tensor))
    elif target is MemoryType.TENSORFLOW:  # TensorFlow takes legacy capsules only
        tf_from_dlpack = importlib.import_module("tensorflow").experimental.dlpack.from_dlpack

        def found(tensor):
            return tf_from_dlpack(_core.export(tensor, False, False))
    else:
        raise AssertionError(f"no importer for {target}")  # pyclesperanto: _into_pyclesperanto
    _IMPORTERS[target] = found
    return found


def _framework_array(tensor, target, copy):
    """Hand the Tensor to the target framework (zero-copy). A framework that would
    make read-only data writable gets a copy of it, unless copy=False forbids it."""
    if tensor.read_only and target in _ALWAYS_WRITABLE:
        if copy is False:
            raise CopyRequiredError(f"the data is read-only and {target.value} arrays are always writable, so it "
                                    "needs a copy, which copy=False forbids")
        tensor = to_device(tensor, tensor.device, copy=True)
    alignment = _ALIGNMENT.get(target)
    if alignment and (tensor.data_ptr + tensor.byte_offset) % alignment:
        if copy is False:
            raise CopyRequiredError(f"the data is not {alignment}-byte aligned, which {target.value} assumes of "
                                    "what it imports (its kernels abort the process otherwise), so it needs a copy, "
                                    "which copy=False forbids")
        log.debug("convert_memory into %s: copied, the data is not %d-byte aligned", target.value, alignment)
        tensor = to_device(tensor, tensor.device, copy=True)
    if target is MemoryType.TORCH and tensor.dtype not in _torch_dtypes():
        # Asked anyway, torch's table fails without taking the tensor it was given.
        raise ValueError(f"torch has no {tensor.dtype} tensors")
    return _importer(target)(tensor)


def jax_array_of(tensor):
    """A Tensor as JAX's array, for Tensor.__jax_array__ (jnp.asarray(t), jnp.array(t),
    a Tensor in jnp's functions): on JAX's device of its memory (the CPU for cpu and
    cuda_host, the GPU of a cuda one), never narrowed (64-bit data with jax_enable_x64
    off is refused), and always a copy of its own: JAX assumes no one writes what its
    arrays hold, and a read-only Tensor may still be written by its memory's owner (a
    read-only view of a NumPy array, a torch tensor's legacy capsule)."""
    kind = tensor.device.split(":")[0]
    if kind not in ("cpu", "cuda_host", "cuda"):
        raise TypeError(f"arraybridge: JAX has no arrays in {tensor.device} memory; move the tensor first: "
                        "jnp.asarray(t.to('cpu'))")
    try:
        _check_target_holds(tensor.dtype, MemoryType.JAX, "cast it first, t.to(t.device, dtype=...)")
    except _NarrowingRefused as refused:
        raise ValueError(f"arraybridge: {refused}") from None
    private = to_device(tensor, "cpu" if kind == "cuda_host" else tensor.device, contiguous=True, copy=True)
    return _framework_array(private, MemoryType.JAX, None)


# The dtypes pyclesperanto keeps (0.25 on OpenCL): it quietly makes 64-bit ints
# 32-bit and complex64 or float64 float32, the narrowing the seed project's push did.
_PYCLESPERANTO_DTYPES = frozenset({"int8", "int16", "int32", "uint8", "uint16", "uint32", "float32"})


# llvm::cl::Option::addArgument(), which every LLVM defines (opencl/loader.cpp probes the same).
_LLVM_PROBE = "_ZN4llvm2cl6Option11addArgumentEv"


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p), ("dli_sname", ctypes.c_char_p),
                ("dli_saddr", ctypes.c_void_p)]


def _global_llvm():
    """The file of an LLVM that libraries opened now would bind (TensorFlow imports
    its own with RTLD_GLOBAL), or None; a shared libLLVM's versioned symbols bind only
    their own version, so it is none of these."""
    process = ctypes.CDLL(None)
    try:
        symbol = getattr(process, _LLVM_PROBE)
    except AttributeError:
        return None
    info = _DlInfo()
    process.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    if not process.dladdr(ctypes.cast(symbol, ctypes.c_void_p), ctypes.byref(info)) or not info.dli_fname:
        return None
    name = os.path.basename(os.fsdecode(info.dli_fname))
    return None if name.startswith("libLLVM") else name


def _pocl_registered():
    """Whether the OpenCL ICD loader will open PoCL (it opens every registered driver)."""
    named = os.environ.get("OCL_ICD_FILENAMES", "")
    vendors = os.environ.get("OCL_ICD_VENDORS", "/etc/OpenCL/vendors")
    files = ([os.path.join(vendors, name) for name in os.listdir(vendors) if name.endswith(".icd")]
             if os.path.isdir(vendors) else [vendors] if os.path.isfile(vendors) else [])
    for file in files:
        try:
            with open(file, encoding="utf-8", errors="replace") as icd:
                named += icd.read()
        except OSError:
            continue
    return "pocl" in named.lower()


def _pyclesperanto():
    """pyclesperanto, imported; refused before its import when that would crash the
    process. pyclesperanto opens OpenCL as it is imported, and PoCL's JIT then binds an
    LLVM already in the process's global scope (TensorFlow's, imported first): SIGSEGV."""
    cle = sys.modules.get("pyclesperanto")
    if cle is not None:
        return cle
    llvm = _global_llvm()
    if llvm and _pocl_registered():
        raise RuntimeError(f"importing pyclesperanto now would crash the process: its OpenCL driver (PoCL) would "
                           f"bind {llvm}'s LLVM, loaded before it (TensorFlow's). Import pyclesperanto and make its "
                           "first array before importing TensorFlow, or convert in a separate process")
    return importlib.import_module("pyclesperanto")


def _into_pyclesperanto(data, gpu_id, host_staging, dtype, copy):
    """A new pyclesperanto array on its OpenCL device gpu_id holding `data`: one
    planned copy into memory pyclesperanto allocated, because a buffer of another
    OpenCL context (ours) is unusable in its context (CL_INVALID_CONTEXT)."""
    if copy is False:
        raise CopyRequiredError("pyclesperanto arrays live in pyclesperanto's own OpenCL context, so the data is "
                                "copied there, which copy=False forbids")
    cle = _pyclesperanto()
    source = from_dlpack(data)  # a view: its shape, dtype and device, nothing copied
    if dtype is not None:
        source = to_device(source, source.device, dtype=dtype)  # the cast asked for, where the data is
    if source.dtype not in _PYCLESPERANTO_DTYPES:
        raise ValueError(f"pyclesperanto has no {source.dtype} arrays (it takes "
                         f"{', '.join(sorted(_PYCLESPERANTO_DTYPES))}); ask for a cast with dtype=")
    if not 1 <= source.ndim <= 3:
        raise ValueError(f"pyclesperanto arrays have 1 to 3 dimensions, not {source.ndim}")
    if 0 in source.shape:  # cle.create((0, 3)) makes (1, 3), and cle.push refuses empty data
        raise ValueError(f"pyclesperanto has no empty arrays (it would make shape {source.shape} into "
                         f"{tuple(max(n, 1) for n in source.shape)})")
    names = cle.list_available_devices()
    if gpu_id >= len(names):  # select_device would quietly pick another one
        raise ValueError(f"pyclesperanto has no device {gpu_id}; it has {len(names)}: {names}")
    previous = cle.get_device()
    np = importlib.import_module("numpy")
    try:
        target = cle.create(source.shape, dtype=np.dtype(source.dtype).type, device=cle.select_device(gpu_id))
    finally:
        _reselect(cle, previous)  # creating an array must not change the caller's current device
    if np.dtype(target.dtype) != np.dtype(source.dtype):  # another version may narrow other dtypes
        raise ValueError(f"pyclesperanto made a {target.dtype} array for {source.dtype} data")
    copy_into(source, target, host_staging=host_staging)  # False: the planner refuses a path through host memory
    return target


def _reselect(cle, device):
    """Makes `device` pyclesperanto's current device again. select_device by its name picks
    the first device whose name holds it: two GPUs of one model share a name, so a caller
    on the second was moved to the first (two PoCL devices show it). The current device is
    pyclesperanto's one module global: set back as it was, or by index where it is not there."""
    current = getattr(sys.modules.get("pyclesperanto._core"), "_current_device", None)
    if current is not None and hasattr(current, "_instance"):
        current._instance = device
        return
    for index in range(len(cle.list_available_devices())):
        if cle.select_device(index) == device:
            return
    cle.select_device(device.name)  # not among them by index: by its name, as before


def _convert_structure(data, source_type, target_type, gpu_id, host_staging, dtype, copy):
    """Each array of a structure converted, the same structure back; a failure names
    the array's place ("data['fc.weight']")."""
    try:
        leaves = _structure.leaves(data, [])
    except ValueError as error:  # a structure that contains itself
        raise MemoryConversionError(_memory_type(source_type).value, _memory_type(target_type).value,
                                    str(error)) from None
    converted = []
    for index, leaf in enumerate(leaves):  # a loop, not a comprehension: see _structure.leaves
        try:
            converted.append(convert_memory(leaf, source_type, target_type, gpu_id, host_staging=host_staging,
                                            dtype=dtype, copy=copy))
        except MemoryConversionError as error:
            place = _structure.places(data, "data", [])[index]
            raise MemoryConversionError(error.source_type, error.target_type, f"{place}: {error.reason}",
                                        error.method) from None
    return _structure.rebuild(data, iter(converted))


# What convert_memory found for a (type of data, source_type, target_type, gpu_id)
# once it checked them: the route to take, so that a loop of conversions pays for the
# checks once (each was a microsecond or more). Only what succeeded is kept.
# A route: (source MemoryType, target MemoryType, device text, contiguous=,
# still_writable, finish): still_writable(data) tells whether data into an immutable
# target needs a copy of its own (None for other targets),
# finish(tensor, copy) making the target's array of the moved Tensor (None until the
# first move succeeded: the target framework is imported then, so that what is refused
# before, a copy=False that needs a copy, never imports it).
_ROUTES = {}
_STRUCTURE = object()  # the route of a structure's type: each of its arrays goes its own way


def _route(data, source_type, target_type, gpu_id):
    """The checked route of `data` (or _STRUCTURE); raises MemoryConversionError.
    A structure's names and gpu_id are checked too: an empty one has no array to check them."""
    source = _memory_type(source_type)
    target = _memory_type(target_type)
    if source is None or target is None:
        role, value = ("source_type", source_type) if source is None else ("target_type", target_type)
        raise MemoryConversionError(str(getattr(source_type, "value", source_type)),
                                    str(getattr(target_type, "value", target_type)), _unknown_type(value, role))
    if _structure.is_structure(data):
        try:
            _target_device(target, gpu_id)
        except ValueError as error:
            raise MemoryConversionError(source.value, target.value, str(error)) from error
        return _STRUCTURE
    try:
        actual = detect_memory_type(data)
    except ValueError as error:
        raise MemoryConversionError(source.value, target.value, str(error)) from error
    if actual is not source:
        raise MemoryConversionError(source.value, target.value,
                                    f"the data is a {actual.value} array, not {source.value}")
    try:
        device = _target_device(target, gpu_id)
    except ValueError as error:
        raise MemoryConversionError(source.value, target.value, str(error)) from error
    if target is MemoryType.PYCLESPERANTO:
        return source, target, device, True, None, _into_pyclesperanto
    still_writable = _STILL_WRITABLE.get(source) if target in _IMMUTABLE else None
    return source, target, device, _LAYOUT_NEEDED.get(target.value, False), still_writable, None


def _finished_route(key, route):
    """The finish of a route whose first move succeeded: imports the target framework,
    and keeps the whole route for the next conversion of its key."""
    source, target = route[:2]
    try:
        finish = _finisher(target)
    except ImportError as error:
        raise MemoryConversionError(source.value, target.value, str(error)) from error
    if key is not None and len(_ROUTES) < 1024:  # a program converts between few kinds; past that, checked each time
        _ROUTES[key] = route[:5] + (finish,)
    return finish


def _finisher(target):
    """finish(tensor, copy) for `target`: _framework_array with what it asks of the
    target looked up once (the numbers of a loop of small conversions: each lookup,
    an enum's hash among them, cost a tenth of a microsecond or more)."""
    importer = _importer(target)
    if target is MemoryType.NUMPY:
        return lambda tensor, copy: importer(tensor)  # NumPy keeps read-only as it is, any dtype DLPack has
    if target is MemoryType.JAX:
        def finish(tensor, copy):
            _check_target_holds(tensor.dtype, target)
            return importer(tensor)
        return finish
    if target is MemoryType.TORCH:
        dtypes, read_only = _torch_dtypes(), lib.DLPACK_FLAG_BITMASK_READ_ONLY

        def finish(tensor, copy):
            if tensor._flags & read_only or tensor.dtype not in dtypes:  # a copy to make, or a refusal
                return _framework_array(tensor, target, copy)
            return importer(tensor)
        return finish
    return lambda tensor, copy: _framework_array(tensor, target, copy)


def convert_memory(data, source_type, target_type, gpu_id=0, *, host_staging=True, dtype=None, copy=None, strict=None):
    """Convert `data` from one framework to another, on GPU `gpu_id` (None = CPU).
    `data` may be a structure of such arrays: a mapping (a dict, a torch state dict),
    list or tuple, nested; the same structure comes back, each array converted.

    The data must really be a `source_type` array. The move is one runtime transfer
    (see to_device); host_staging=False refuses any path that stages through host
    memory (strict=True, its old spelling, is deprecated).
    The result has the source's values and dtype: a target that cannot hold that
    dtype (JAX with jax_enable_x64 off: no 64-bit types) is refused, never narrowed;
    dtype= asks for a cast on the way (the runtime's casts, as to_device's dtype=).
    A layout the target cannot hold is copied compact once: negative strides into
    torch (a flipped image), anything but compact row-major into JAX, TensorFlow or
    pyclesperanto, and data not 64-byte aligned into TensorFlow (whose kernels abort
    the process on it); the DEBUG log line says why. copy=None copies only where needed,
    copy=True always, copy=False never: what would need one is refused, naming why.
    What the source's owner treats as immutable (JAX, TensorFlow, read-only NumPy)
    never comes back as a writable alias: a NumPy result is then read-only. Nor does
    a JAX or TensorFlow array (immutable to its owner) alias memory its source may
    still write (a torch or CuPy tensor, any NumPy array but a read-only view of bytes
    or of a JAX or TensorFlow array): that reaches it as a copy, as jnp.asarray's and
    convert_to_tensor's, and copy=False is refused. A torch tensor into torch on its
    own device (no copy or dtype asked) is the tensor itself, as torch.as_tensor's: a new
    tensor over its memory would have a version counter of its own, and autograd would
    miss writes through it. One that requires grad is read-only to arraybridge, so it
    comes back as a copy that does not.
    Any failure raises MemoryConversionError with the source, target and reason, but
    Python's memory running out, which stays a MemoryError.
    """
    if strict is not None or host_staging is not True:
        host_staging = _deprecated.host_staging("convert_memory", host_staging, strict)
    key = (type(data), source_type, target_type, gpu_id, type(gpu_id))  # True == 1, but is no gpu_id
    try:
        route = _ROUTES[key]
    except KeyError:
        route = _route(data, source_type, target_type, gpu_id)
        if (route is _STRUCTURE or route[5] is not None) and len(_ROUTES) < 1024:
            _ROUTES[key] = route  # complete already; a framework's is kept once its first move succeeded
    except TypeError:  # an unhashable argument: checked each time (and refused there, or a structure)
        key, route = None, _route(data, source_type, target_type, gpu_id)
    if route is _STRUCTURE:
        return _convert_structure(data, source_type, target_type, gpu_id, host_staging, dtype, copy)
    source, target, device, contiguous, still_writable, finish = route
    if target is source and source is MemoryType.TORCH and copy is not True and dtype is None and \
            str(data.device) == device and not data.requires_grad:
        # The tensor itself, as torch.as_tensor gives it: a new tensor over its memory would
        # have a version counter of its own, and autograd would miss writes through it.
        if finish is None:
            _finished_route(key, route)  # kept, as a conversion's that moved
        return data
    try:
        if finish is _into_pyclesperanto:
            result = _into_pyclesperanto(data, int(device[len("opencl:"):]), host_staging, dtype, copy)
            log.debug("convert_memory %s -> pyclesperanto: one copy into its context", source.value)
            return result
        moved_copy = copy
        if still_writable is not None and copy is not True and still_writable(data):
            moved_copy = _private_copy(source, target, copy)
        if moved_copy is None and host_staging and dtype is None:
            tensor = to_device(data, device, contiguous=contiguous)
        else:
            tensor = to_device(data, device, copy=moved_copy, host_staging=host_staging, contiguous=contiguous,
                               dtype=dtype)
    except (ArrayBridgeError, BufferError, ValueError, TypeError, AttributeError, RuntimeError,
            ImportError) as error:
        raise MemoryConversionError(source.value, target.value, str(error)) from error
    if finish is None:
        finish = _finished_route(key, route)
    try:
        result = finish(tensor, copy)
    except MemoryError:  # not the target's refusal: Python's memory ran out, as to_device's may
        raise
    except (CopyRequiredError, _NarrowingRefused) as error:  # ours, in its own words
        raise MemoryConversionError(source.value, target.value, str(error)) from error
    except Exception as error:  # the target's importer: its first line, never its C++ backtrace
        said = str(error).strip()
        raise MemoryConversionError(source.value, target.value, f"{target.value} cannot take this {tensor.dtype} "
                                    f"tensor: {said.splitlines()[0] if said else type(error).__name__}") from None
    if log.isEnabledFor(_DEBUG):
        log.debug("convert_memory %s -> %s: %s (%s)", source.value, target.value, tensor.report.path,
                  tensor.report.detail)
    return result
