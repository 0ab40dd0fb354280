"""Old spellings that keep working: each use warns (DeprecationWarning) naming the new one."""
import warnings


def warn_moved(old, new, stacklevel=3):
    """`old` is spelled `new` now (said where the caller used it)."""
    warnings.warn(f"{old} is {new} now", DeprecationWarning, stacklevel=stacklevel)


def host_staging(call, host_staging, strict, stacklevel=4):
    """host_staging= of a call that also takes strict=, its old spelling (strict=True
    refused the same paths host_staging=False refuses). `stacklevel`: the caller's frame
    as warnings counts it from warn_moved."""
    if strict is None:
        if host_staging is True or host_staging is False or type(host_staging).__name__ in ("bool", "bool_"):
            return bool(host_staging)  # NumPy's bool too, as to_device takes it
        raise TypeError(f"{call}: host_staging must be True or False, not {host_staging!r}")
    if host_staging is not True:
        raise TypeError(f"{call}: give host_staging= only (strict= is its old spelling)")
    warn_moved(f"{call}(strict={strict!r})", f"{call}(host_staging={not strict!r})", stacklevel)
    return not strict
