"""Loads the package's one native module, saying what to do when it is missing, and
installs the hot path it holds as arraybridge._core."""
import sys

try:
    from ._native import ffi, lib
except ImportError as error:  # the build is missing or libarraybridge moved
    raise ImportError(
        f"arraybridge could not load its native part ({error}). Build the library with "
        "`make` in the repository root (or `make install`), then reinstall this package "
        "with `pip install ./python`.") from error


def install_core():
    """Puts arraybridge._core (compiled into _native) in sys.modules; installing again
    puts the same module back. MemoryError where Python's memory ran out."""
    error = ffi.new("char[]", 512)
    status = lib.abr_python_core_install(error, len(error))
    if status:
        message = ffi.string(error).decode("utf-8", "replace")
        raise (MemoryError if status == 1 else ImportError)(f"arraybridge._core could not start: {message}")


install_core()
from . import _core  # noqa: E402 - made by install_core, found in sys.modules

# The package's attribute too, as an import of a submodule from a file would set it.
setattr(sys.modules[__package__], "_core", _core)

__all__ = ["ffi", "lib", "_core"]
