"""DLPack data types <-> NumPy-style names ("float32", "bool", "complex64")."""

_CODES = {0: "int", 1: "uint", 2: "float", 4: "bfloat", 5: "complex", 6: "bool"}
_BY_NAME = {}
for _code, _prefix in _CODES.items():
    for _bits in (8, 16, 32, 64, 128):
        _BY_NAME[f"{_prefix}{_bits}"] = (_code, _bits, 1)
_BY_NAME["bool"] = (6, 8, 1)
del _code, _prefix, _bits


def dtype_name(code, bits, lanes):
    if code == 6 and bits == 8 and lanes == 1:
        return "bool"
    prefix = _CODES.get(code, f"code{code}_")
    name = f"{prefix}{bits}"
    return name if lanes == 1 else f"{name}x{lanes}"


def parse_dtype(dtype):
    """(code, bits, lanes) for a name, a NumPy dtype or scalar type, or a triple."""
    if isinstance(dtype, tuple) and len(dtype) == 3:
        return tuple(int(v) for v in dtype)
    name = getattr(dtype, "name", None)  # numpy.dtype, torch-like dtype objects
    if not isinstance(name, str):
        name = getattr(dtype, "__name__", dtype)  # numpy.float32 and friends
    if isinstance(name, str):
        found = _BY_NAME.get(name.lower().replace("torch.", ""))
        if found:
            return found
    raise ValueError(f"arraybridge: unknown dtype {dtype!r}; expected a name such as 'float32', "
                     "'uint8', 'bool', 'complex64', a NumPy dtype, or a DLPack (code, bits, lanes) triple")
