"""DLPack tensors, capsules, producers and exchange-API tables made by hand with
ctypes: every field is the caller's choice, as another library could hand them to
arraybridge, and every deleter call is counted. Used by tests/fuzz/python and by
tests/python (test_fuzz_regressions.py; OnlyDLPack in test_torch_exact.py and
test_ndarray_import.py)."""
import ctypes
from ctypes import CFUNCTYPE, POINTER, Structure, c_char_p, c_int, c_int32, c_int64, c_uint8, c_uint16, c_uint32
from ctypes import c_uint64, c_void_p, py_object

VERSIONED = b"dltensor_versioned"
LEGACY = b"dltensor"
EXCHANGE_API = b"dlpack_exchange_api"
OTHER_NAME = b"not_a_dltensor"
READ_ONLY = 1 << 0
IS_COPIED = 1 << 1
CPU, CUDA, CUDA_HOST, OPENCL = 1, 2, 3, 4


class DLDevice(Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(Structure):
    _fields_ = [("data", c_void_p), ("device", DLDevice), ("ndim", c_int32), ("dtype", DLDataType),
                ("shape", POINTER(c_int64)), ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]


class DLPackVersion(Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


DELETER = CFUNCTYPE(None, c_void_p)  # both kinds: the argument is the tensor's own address


class DLManagedTensor(Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", DELETER)]


class DLManagedTensorVersioned(Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", c_void_p), ("deleter", DELETER), ("flags", c_uint64),
                ("dl_tensor", DLTensor)]


class DLPackExchangeAPIHeader(Structure):
    pass


DLPackExchangeAPIHeader._fields_ = [("version", DLPackVersion), ("prev_api", POINTER(DLPackExchangeAPIHeader))]

FROM_PY_OBJECT = CFUNCTYPE(c_int, c_void_p, POINTER(c_void_p))
CURRENT_WORK_STREAM = CFUNCTYPE(c_int, c_int32, c_int32, POINTER(c_void_p))


class DLPackExchangeAPI(Structure):
    _fields_ = [("header", DLPackExchangeAPIHeader), ("managed_tensor_allocator", c_void_p),
                ("managed_tensor_from_py_object_no_sync", FROM_PY_OBJECT),
                ("managed_tensor_to_py_object_no_sync", c_void_p), ("dltensor_from_py_object_no_sync", c_void_p),
                ("current_work_stream", CURRENT_WORK_STREAM)]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = py_object
_capsule_new.argtypes = [c_void_p, c_char_p, c_void_p]
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = c_char_p
_capsule_name.argtypes = [py_object]
_error_occurred = ctypes.pythonapi.PyErr_Occurred
_error_occurred.restype = c_void_p


def new_capsule(address, name):
    """A capsule of `address` named `name` (a module-level bytes constant: the capsule
    keeps only its pointer), with no destructor: whoever consumes it owns the tensor."""
    return _capsule_new(address, name, None)


def capsule_name(capsule):
    return _capsule_name(capsule).decode()


class Handmade:
    """One DLManagedTensor(Versioned) in memory this object owns. `calls` counts its
    deleter's calls; `has_deleter=False` leaves the deleter NULL."""

    def __init__(self, versioned=True, version=(1, 0), flags=0, data=None, device=(CPU, 0), ndim=1, dtype=(2, 32, 1),
                 shape=(1,), strides=None, byte_offset=0, shape_null=False, has_deleter=True):
        self.versioned = versioned
        self.calls = 0
        self.called_with_error = False
        self.managed = DLManagedTensorVersioned() if versioned else DLManagedTensor()
        self._shape = (c_int64 * max(len(shape), 1))(*shape)
        self._strides = None if strides is None else (c_int64 * max(len(strides), 1))(*strides)
        t = self.managed.dl_tensor
        t.data = data
        t.device = DLDevice(*device)
        t.ndim = ndim
        t.dtype = DLDataType(*dtype)
        t.shape = ctypes.cast(None if shape_null else self._shape, POINTER(c_int64))
        t.strides = ctypes.cast(self._strides, POINTER(c_int64))
        t.byte_offset = byte_offset
        if versioned:
            self.managed.version = DLPackVersion(*version)
            self.managed.flags = flags
        self._deleter = DELETER(self._count) if has_deleter else DELETER()
        self.managed.deleter = self._deleter

    def _count(self, address):
        self.calls += 1
        try:  # a deleter must not be called with an exception set: this call would raise it
            _error_occurred()
        except BaseException:
            self.called_with_error = True

    @property
    def address(self):
        return ctypes.addressof(self.managed)

    def capsule(self, name=None):
        return new_capsule(self.address, name or (VERSIONED if self.versioned else LEGACY))

    def delete(self):
        """What a capsule's destructor does for a capsule nobody consumed."""
        if self._deleter:
            self._deleter(self.address)


class Producer:
    """An object with __dlpack__ and __dlpack_device__ that hands out `make()`'s
    capsules (or raises what `make()` raises). `keywords`: whether __dlpack__ takes
    DLPack 1.0's keywords; without them it raises TypeError as an old producer does."""

    def __init__(self, make, device=(CPU, 0), keywords=True):
        self.make, self.device, self.keywords = make, device, keywords
        self.calls = 0

    def __dlpack__(self, stream=None, **keywords):
        self.calls += 1
        if keywords and not self.keywords:
            raise TypeError(f"__dlpack__() got unexpected keywords {sorted(keywords)}")
        return self.make()

    def __dlpack_device__(self):
        return self.device


class OnlyDLPack:
    """Another framework's array seen only through its own __dlpack__ and
    __dlpack_device__: the general import, without the ways arraybridge reads that
    array's type otherwise (torch's exchange table, NumPy's buffer protocol)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, **kwargs):
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def exchange_table(version=(1, 3), prev_api=None, from_py_object=None, current_work_stream=None):
    """A DLPackExchangeAPI with the given callbacks (ctypes functions, or None for NULL)."""
    table = DLPackExchangeAPI()
    table.header.version = DLPackVersion(*version)
    if prev_api is not None:
        table.header.prev_api = ctypes.cast(ctypes.pointer(prev_api), POINTER(DLPackExchangeAPIHeader))
    table.managed_tensor_from_py_object_no_sync = from_py_object or FROM_PY_OBJECT()
    table.current_work_stream = current_work_stream or CURRENT_WORK_STREAM()
    return table


def framework_type(table, name=EXCHANGE_API, dlpack=None):
    """A new type publishing `table` as arraybridge finds exchange APIs (a capsule in
    the type's __dlpack_c_exchange_api__). The type keeps the table, and with it the
    callbacks, alive; `dlpack`, if given, becomes its __dlpack__."""
    namespace = {"__dlpack_c_exchange_api__": new_capsule(ctypes.addressof(table), name), "table": table}
    if dlpack is not None:
        namespace["__dlpack__"] = dlpack
    return type("HandmadeFramework", (), namespace)
