"""Loads the two native modules, saying what to do when they are missing."""
try:
    from ._native import ffi, lib
    from . import _core
except ImportError as error:  # the build is missing or libarraybridge moved
    raise ImportError(
        f"arraybridge could not load its native part ({error}). Build the library with "
        "`make` in the repository root (or `make install`), then reinstall this package "
        "with `pip install ./python`.") from error

__all__ = ["ffi", "lib", "_core"]
