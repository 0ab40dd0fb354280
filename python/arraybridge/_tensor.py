"""arraybridge.Tensor: a tensor the runtime produced, and a DLPack producer."""
import ctypes
from collections import namedtuple

from . import _deprecated
from ._device import DLDeviceType
from ._errors import CopyRequiredError, DeviceError, DLPackError, StreamError
from ._ipc import IpcHandle
from ._kinds import DLPACK_STREAMS, HANDLES, HOST_READABLE
from ._lib import _core, lib
from ._stream import stream_handle

TransferReport = namedtuple("TransferReport", "path bytes_moved packed cast detail")
TransferReport.__doc__ = """What the planner did: `path` ("zero_copy", "host_copy",
"host_to_device", "device_to_host", "device_copy", "staged", "peer", "host_wrap"),
the bytes written to the destination, whether a strided source was packed or the
dtype cast, and the runtime's one-line explanation."""

# A device __dlpack__(dl_device=) names that is not here: BufferError, as the standard says.
_NOT_THERE = (lib.ABR_ERR_NO_DEVICE, lib.ABR_ERR_BACKEND_UNAVAILABLE, lib.ABR_ERR_UNSUPPORTED)
_PACKED, _CAST = lib.ABR_REPORT_PACKED, lib.ABR_REPORT_CAST
_DEVICE_TYPES = {int(t): t for t in DLDeviceType}
# The dtypes NumPy has (our names are NumPy's for these).
_NUMPY_DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16",
                           "float32", "float64", "complex64", "complex128"})


def _host_array(tensor):
    """A Tensor's elements as a compact NumPy array in host memory, for pickle: dtypes
    NumPy lacks (bfloat16, float8) as ml_dtypes' types, which NumPy arrays hold."""
    try:
        import numpy as np
    except ImportError:
        raise TypeError("arraybridge: pickling a Tensor needs NumPy: its elements travel as a NumPy array") from None
    host = _core.to_device(tensor, "cpu", contiguous=True)  # a view where it is compact in host memory
    if tensor.dtype in _NUMPY_DTYPES:
        return np.from_dlpack(host)
    try:
        import ml_dtypes
        dtype = np.dtype(getattr(ml_dtypes, tensor.dtype))
    except (ImportError, AttributeError, TypeError):
        raise TypeError(f"arraybridge: pickling a {tensor.dtype} Tensor needs a NumPy dtype for it (ml_dtypes "
                        f"has bfloat16 and float8): convert it first, t.to(t.device, dtype=...)") from None
    raw = ctypes.string_at(host.data_ptr + host.byte_offset, host.nbytes) if host.nbytes else b""
    return np.frombuffer(raw, dtype=dtype).reshape(host.shape)


def _unpickled(array, device):
    """A pickled Tensor made again: its elements on its device, the receiver's own copy.
    Pickles name this function: keep its name and module."""
    try:
        return _core.to_device(array, device, copy=True)
    except DeviceError as error:
        raise DeviceError(f"arraybridge: a Tensor pickled on {device} is unpickled in a process without that "
                          f"device ({error})", error.status, error.status_name) from None


def _pair_of_ints(value):
    """Whether value is a tuple of two ints, as __dlpack__'s max_version and dl_device are."""
    return type(value) is tuple and len(value) == 2 and all(isinstance(v, int) for v in value)


@_core.untracked_type  # the same class, but the cycle collector does not track its instances (see _core)
class Tensor(_core.TensorBase):
    """A tensor owned by arraybridge, on any of its devices.

    Made by `to_device` and `from_dlpack`, never directly. Any DLPack consumer takes
    it (`numpy.from_dlpack(t)`, `torch.from_dlpack(t)`, ...); each export is a view
    that keeps this tensor's memory alive until the consumer lets go.
    """

    # The C base holds the managed tensor (_device, _flags) and the report
    # (_report), deletes the tensor when the Tensor dies, and answers __dlpack__
    # for this device without a stream or a copy; _dlpack_slow does the rest.
    __slots__ = ()

    # The C base also describes the tensor: shape, strides (in elements, as DLPack
    # counts them), ndim, dtype, itemsize, device, data_ptr (a pointer, or the
    # cl_mem handle on OpenCL) and byte_offset.

    @property
    def size(self):
        """The number of elements."""
        n = 1
        for extent in self.shape:
            n *= extent
        return n

    @property
    def nbytes(self):
        """The bytes its elements take (size times itemsize)."""
        return self.size * self.itemsize

    @property
    def read_only(self):
        """Whether its data must not be written: read-only at its source (JAX, TensorFlow, a read-only
        NumPy array, a legacy capsule), and so in every view of it."""
        return bool(self._flags & lib.DLPACK_FLAG_BITMASK_READ_ONLY)

    @property
    def report(self):
        """The TransferReport of the transfer that made this tensor."""
        path, bytes_moved, flags, detail = self._report
        return TransferReport(path, bytes_moved, bool(flags & _PACKED), bool(flags & _CAST), detail)

    def __repr__(self):
        flags = ", read_only" if self.read_only else ""
        return (f"arraybridge.Tensor(shape={self.shape}, dtype={self.dtype}, device={self.device}, "
                f"path={self.report.path}{flags})")

    # wait() and is_ready() are the C base's: a Tensor from to_device(..., non_blocking=True)
    # may still be filled by queued work; every export (DLPack, the buffer protocol, the
    # C exchange API) waits for it, or orders the consumer's CUDA stream after it.

    def to(self, device, **kwargs):
        """Same as arraybridge.to_device(self, device, **kwargs)."""
        if "strict" in kwargs:  # its old spelling, said where the caller wrote it
            kwargs["host_staging"] = _deprecated.host_staging("Tensor.to", kwargs.get("host_staging", True),
                                                              kwargs.pop("strict"))
        return _core.to_device(self, device, **kwargs)

    def __array__(self, dtype=None, copy=None):
        """NumPy's array of it (np.asarray), where NumPy can view it: most host tensors
        answer through the buffer protocol before NumPy asks this. A dtype NumPy lacks,
        or memory the host cannot read, raises TypeError saying what to do, where NumPy
        would otherwise make a 0-d object array holding the Tensor."""
        import numpy as np
        if self.dtype not in _NUMPY_DTYPES:
            convert = ("convert it first, np.asarray(t.to('cpu', dtype='float32')), or "
                       if self.dtype == "bfloat16" else "")  # the runtime casts no float8, float4 or complex32
            raise TypeError(f"arraybridge: NumPy has no {self.dtype} arrays: {convert}hand it to a framework that "
                            f"has {self.dtype} (torch.from_dlpack(t))")
        if self._device[0] not in HOST_READABLE:
            raise TypeError(f"arraybridge: NumPy reads host memory, and this tensor is on {self.device}: "
                            f"move it first, np.asarray(t.to('cpu'))")
        array = np.from_dlpack(self)
        if dtype is not None and np.dtype(dtype) != array.dtype:
            if copy is False:
                raise ValueError(f"arraybridge: a {self.dtype} tensor as {np.dtype(dtype)} needs a copy, which "
                                 "copy=False forbids")
            return array.astype(dtype)
        return array.copy() if copy else array

    def __jax_array__(self):
        """JAX's array of it, which jnp.asarray(t), jnp.array(t) and jnp's functions ask
        for (without it they read Tensor.dtype, a name, and NumPy refuses a name there):
        on JAX's device of its memory, always a copy (JAX assumes no one writes its
        arrays), 64-bit data with jax_enable_x64 off refused, never narrowed. jax.jit and
        jax.device_put take no Tensor: pass jnp.asarray(t)."""
        from . import _seed  # here: _seed imports the modules this one is imported by
        return _seed.jax_array_of(self)

    # A 0-d host tensor as a Python number, as NumPy's: without these, int() and float()
    # of a host Tensor read its bytes through the buffer protocol as text (a uint8 53
    # gave int 5).
    def __int__(self):
        return int(self._scalar("int"))

    def __float__(self):
        return float(self._scalar("float"))

    def __complex__(self):
        return complex(self._scalar("complex"))

    def __bool__(self):
        # The truth of a tensor of one element is its value, as NumPy's (it was True
        # whatever the value: a Tensor of 0 was true); of any other, ambiguous, as NumPy says.
        if self.size != 1:
            raise ValueError(f"arraybridge: the truth value of a tensor of shape {self.shape} is ambiguous; ask "
                             "of its values (np.asarray(t).any() or .all()), or of t.size")
        return bool(self._scalar("bool", "bool(t.to('cpu'))", any_shape=True))

    def __index__(self):
        value = self._scalar("index", "int(t.to('cpu'))")
        if not self.dtype.startswith(("int", "uint")):
            raise TypeError(f"arraybridge: only an integer tensor is an index; this one is {self.dtype}")
        return int(value)

    def __format__(self, spec):
        # f"{t:.3f}" of a 0-d host tensor formats its value, as NumPy's 0-d arrays do.
        return format(self._scalar("number to format", "format(t.to('cpu'), spec)"), spec) if spec else str(self)

    def _scalar(self, what, again=None, any_shape=False):
        """Its one element, as NumPy's scalar, for int(), float(), complex(), bool(), an
        index or format(); `again`: the call that works for a tensor in device memory;
        any_shape: of one element in any shape (bool's), else of a 0-d tensor."""
        if self.shape != () and not any_shape:
            raise TypeError(f"arraybridge: only a 0-d tensor converts to a Python {what}; this one has shape "
                            f"{self.shape} (np.asarray(t) gives its elements)")
        if self._device[0] not in HOST_READABLE:  # said here: __array__'s words name np.asarray
            again = again or f"{what}(t.to('cpu'))"
            raise TypeError(f"arraybridge: a Python {what} is read in host memory, and this tensor is on "
                            f"{self.device}: move it first, {again}")
        return self.__array__().reshape(())[()]

    # copy.copy and copy.deepcopy (of a structure holding Tensors: a state dict) copy the
    # elements on the same device, as NumPy's copy an array's, rather than a pickle's
    # round trip through host memory. The copy is the caller's, writable.
    def __copy__(self):
        return _core.to_device(self, self._device, copy=True)

    def __deepcopy__(self, memo):
        return self.__copy__()

    # pickle (multiprocessing, joblib, Ray's object store) carries a Tensor by value, as
    # it carries NumPy's arrays and torch's tensors: its elements as a NumPy array, made
    # again on the same device where it is unpickled, a copy the receiver's own (writable).
    # It raised "cannot pickle 'arraybridge.Tensor' object".
    def __reduce__(self):
        return _unpickled, (_host_array(self), self.device)

    def ipc_handle(self):
        """An IpcHandle naming this CUDA tensor's memory for another process (see
        arraybridge.from_ipc); keep this tensor alive until the importers let go."""
        return IpcHandle(_core.ipc_export(self, None))

    # ---------------------------------------------------------- DLPack producer

    def __dlpack_device__(self):
        """(DLDeviceType, device id) of its memory, as DLPack asks."""
        kind, index = self._device
        return _DEVICE_TYPES.get(kind, kind), index

    # __dlpack__ is the C base's: it exports this tensor as it is, and calls this
    # for a stream, another device, a copy or a request it must refuse.
    def _dlpack_slow(self, stream, max_version, dl_device, copy):
        source, copied = self, False
        if max_version is not None and not _pair_of_ints(max_version):
            raise TypeError(f"arraybridge: __dlpack__'s max_version is None or a (major, minor) tuple of two ints, "
                            f"such as (1, 0), as NumPy's is; got {max_version!r}")
        if stream == -1 and self._device[0] in HANDLES:
            # mpi4py asks so of any device but the CPU, then reads data as an address.
            raise DLPackError(f"arraybridge: a tensor on {self.device} was asked for with stream=-1, as a consumer of "
                              "device pointers asks (mpi4py does), but its data is a handle (a cl_mem), not an "
                              "address; stage it through host memory: arraybridge.mpi.buffer(t) for MPI, or t.to('cpu')")
        if stream is not None and stream != -1 or dl_device is not None or copy:
            own = self.__dlpack_device__()
            if dl_device is not None and not _pair_of_ints(dl_device):
                raise TypeError(f"arraybridge: __dlpack__'s dl_device is None or a (device type, device id) tuple "
                                f"of two ints, such as (1, 0), as NumPy's is; got {dl_device!r}")
            target = own if dl_device is None else (int(dl_device[0]), int(dl_device[1]))
            if stream is not None and stream != -1 and own[0] not in DLPACK_STREAMS:
                raise StreamError(f"arraybridge: stream={stream!r} given for a tensor on {self.device}; "
                                  "DLPack devices without streams take stream=None")
            if stream is not None:
                # Only the value is checked here: queued work (non_blocking) is ordered below.
                try:
                    stream_handle(stream)
                except (ValueError, TypeError) as error:  # a wrong argument, as on a stream-less device
                    raise StreamError(str(error)) from error
            if copy or target != own:
                try:
                    source = _core.transfer(self, target, copy, "__dlpack__")
                except CopyRequiredError as error:  # the producer side of DLPack says BufferError
                    raise DLPackError(str(error), error.status, error.status_name) from error
                except DeviceError as error:  # so does it for a device it cannot export to
                    if error.status not in _NOT_THERE:
                        raise
                    raise DLPackError(str(error), error.status, error.status_name) from error
                copied = source.report.path != "zero_copy"
        if source is self and not self.is_ready():  # to_device(..., non_blocking=True) still filling it
            if stream is not None and stream != -1 and self._device[0] in DLPACK_STREAMS:
                self._order_before(stream)  # the consumer's stream waits on the device; the host goes on
            else:
                self.wait()  # no stream to order on: the consumer reads once this returns
        versioned = max_version is not None and max_version[0] >= 1
        if not versioned and source.read_only:
            # A legacy capsule cannot say read-only, and its consumer may write: it gets a
            # copy of its own, which copy=None allows (JAX asks so), or a refusal.
            if copy is False:
                raise DLPackError("arraybridge: a read-only tensor cannot be exported as a legacy DLPack capsule, "
                                  "which cannot say it is read-only, and copy=False forbids a copy; ask for "
                                  "max_version=(1, 0) or later")
            source, copied = _core.transfer(source, source.__dlpack_device__(), True, "__dlpack__"), True
        return _core.export(source, versioned, copied)
