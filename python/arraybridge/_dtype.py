"""DLPack data types <-> names ("float32", "bool", "complex64"): the library's
vocabulary (abr_dtype_parse/abr_dtype_format); only Python's own dtype objects
are unwrapped here."""
from ._errors import last_problem
from ._lib import ffi, lib


def dtype_name(code, bits, lanes):
    name = ffi.new("char[]", lib.ABR_NAME_MAX)
    if lib.abr_dtype_format((code, bits, lanes), name, lib.ABR_NAME_MAX) != lib.ABR_OK:
        raise ValueError(f"arraybridge: {last_problem()}")
    return ffi.string(name).decode()


def parse_dtype(dtype):
    """(code, bits, lanes) for a name, a NumPy dtype or scalar type, a torch dtype, or a triple."""
    if isinstance(dtype, tuple) and len(dtype) == 3:
        return tuple(int(v) for v in dtype)
    name = getattr(dtype, "name", None)  # numpy.dtype
    if getattr(dtype, "isnative", True) is False:
        _native_only(dtype, dtype)
    if isinstance(getattr(dtype, "kind", None), str) and isinstance(getattr(dtype, "itemsize", None), int):
        _no_long_double(dtype, dtype)
    if not isinstance(name, str):
        name = getattr(dtype, "__name__", dtype)  # numpy.float32 and friends
    if not isinstance(name, str):
        name = str(dtype)  # torch.float32 has no name: its str is "torch.float32"
    if name.startswith("torch."):
        name = name[len("torch."):]
    out = ffi.new("DLDataType*")
    if lib.abr_dtype_parse(name.encode("utf-8", "replace"), out) == lib.ABR_OK:
        return out.code, out.bits, out.lanes
    message = last_problem()
    numpy_name = _numpy_name(dtype)  # what NumPy accepts: float, int, "f8", "<i4", ...
    if numpy_name is not None and lib.abr_dtype_parse(numpy_name.encode(), out) == lib.ABR_OK:
        return out.code, out.bits, out.lanes
    raise ValueError(f"arraybridge: {message} (from {dtype!r}), or what numpy.dtype() takes, "
                     "or a DLPack (code, bits, lanes) triple")


def _numpy_name(dtype):
    """NumPy's name for what numpy.dtype() accepts (float is float64, "f8" too), or None.
    A byte order other than this machine's is refused: DLPack data is in native order,
    and ">f4" must not quietly come back native float32."""
    try:
        import numpy
        found = numpy.dtype(dtype)
    except (ImportError, TypeError, ValueError):
        return None
    _native_only(dtype, found)
    _no_long_double(dtype, found)
    return found.name


def _native_only(asked, dtype):
    """Refuses a NumPy dtype of the other byte order, by name."""
    if not dtype.isnative:
        raise ValueError(f"arraybridge: dtype {asked!r} is {'big' if dtype.byteorder == '>' else 'little'}-endian, "
                         f"and DLPack holds data in this machine's byte order only; ask for "
                         f"{dtype.newbyteorder('=').name!r} and swap the bytes afterwards (.byteswap()) if you must")


def _no_long_double(asked, dtype):
    """Refuses NumPy's long double by name: its name says 128 bits (or 96), but what it
    holds is the machine's own (x87's 80 bits padded on x86-64), which the runtime does
    not move."""
    if dtype.kind in ("f", "c") and dtype.itemsize > (8 if dtype.kind == "f" else 16):
        raise ValueError(f"arraybridge: dtype {asked!r} is NumPy's long double ({dtype.name}, this machine's "
                         f"extended precision), which DLPack has no type for; ask for "
                         f"{'float64' if dtype.kind == 'f' else 'complex128'}")
