"""The package's face: the top level is the transfer API; the seed API, MPI, NIXL and
Ray are submodules imported on first use; the names the top level held before keep
working and warn (DeprecationWarning) naming the new spelling, as does strict=, now
host_staging=."""
import subprocess
import sys
import warnings

import numpy as np
import pytest

import arraybridge as ab

MOVED = {"convert_memory": "convert.convert_memory", "detect_memory_type": "convert.detect_memory_type",
         "MemoryType": "convert.MemoryType", "CPU_MEMORY_TYPES": "convert.CPU_MEMORY_TYPES",
         "GPU_MEMORY_TYPES": "convert.GPU_MEMORY_TYPES", "SUPPORTED_MEMORY_TYPES": "convert.SUPPORTED_MEMORY_TYPES",
         "mpi_buffer": "mpi.buffer", "mpi_cuda_aware": "mpi.cuda_aware", "NixlPeer": "nixl.Peer",
         "NixlTransfer": "nixl.Transfer", "nixl_available": "nixl.nixl_available"}


def printed_by_a_fresh_process(code):
    """The lines `code` prints in a Python process of its own (this one imported the
    package's parts already)."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_import_loads_no_submodule_until_one_is_named():
    lines = printed_by_a_fresh_process(
        "import sys, arraybridge as ab\n"
        "print(sorted(m for m in sys.modules if m.startswith('arraybridge.') and '._' not in m))\n"
        "print(sorted(m for m in ('arraybridge._seed', 'arraybridge._mpi') if m in sys.modules))\n"
        "ab.convert\n"
        "print(sorted(m for m in sys.modules if m.startswith('arraybridge.') and '._' not in m))\n")
    assert lines[:3] == ["[]", "[]", "['arraybridge.convert']"], lines


def test_import_loads_one_native_extension_which_holds_the_hot_path():
    # The loader's own map: which of the package's files are shared objects it mapped
    # (libarraybridge, which the wheel bundles beside the package, is the library).
    mapped, modules, made = printed_by_a_fresh_process(
        "import os, sys, arraybridge, arraybridge._core as core\n"
        "root = os.path.dirname(arraybridge.__file__)\n"
        "maps = {line.split()[-1] for line in open('/proc/self/maps') if line.rstrip().endswith('.so')}\n"
        "print(' '.join(sorted(os.path.basename(m) for m in maps if m.startswith(root + os.sep))))\n"
        "print(sorted(n for n, m in sys.modules.items() if n.startswith('arraybridge') and\n"
        "             (getattr(m, '__file__', None) or '').endswith('.so')))\n"
        "print(hasattr(core, '__file__'), core is sys.modules['arraybridge._core'] is arraybridge._core)\n")
    assert len(mapped.split()) == 1 and mapped.startswith("_native."), mapped
    assert modules == "['arraybridge._native']", modules
    assert made == "False True", made  # _core is made by _native, from no file of its own
    # A second installation (the package's own, or another loader's) keeps the one module.
    core = ab._core
    sys.modules["arraybridge._lib"].install_core()  # the module (the package's _lib is cffi's library)
    assert sys.modules["arraybridge._core"] is core and core.to_device is ab._core.to_device


@pytest.mark.parametrize("name", ["convert", "mpi", "nixl", "ray"])
def test_a_submodule_is_an_attribute_once_named(name):
    module = getattr(ab, name)
    assert module.__name__ == f"arraybridge.{name}" and sys.modules[module.__name__] is module
    assert name in dir(ab) and name not in ab.__all__  # `import *` does not import them all


@pytest.mark.parametrize("old, new", sorted(MOVED.items()))
def test_an_old_name_warns_naming_the_new_one_and_is_it(old, new):
    module, name = new.split(".")
    with pytest.warns(DeprecationWarning) as caught:
        alias = getattr(ab, old)
    assert [str(w.message) for w in caught] == [f"arraybridge.{old} is arraybridge.{new} now"]
    assert caught[0].filename == __file__  # said where the caller used it
    assert alias is getattr(getattr(ab, module), name)
    assert old not in ab.__all__ and old not in dir(ab)


def test_the_top_level_names_only_its_own():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no public name of the top level is an alias
        names = {name: getattr(ab, name) for name in ab.__all__}
    assert not set(names) & set(MOVED)
    assert "to_device" in names and "Tensor" in names
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        ab.no_such_name  # noqa: B018


def test_peer_lost_is_one_class_of_the_error_family():
    assert ab.PeerLostError is ab.nixl.PeerLostError
    assert issubclass(ab.PeerLostError, ab.ArrayBridgeError) and issubclass(ab.PeerLostError, ConnectionError)
    error = ab.PeerLostError("peer 'a' is gone")
    assert error.status_name == "peer_lost" and str(error) == "peer 'a' is gone"


def test_convert_memory_strict_is_host_staging_spelled_the_old_way():
    source = np.arange(3.0)
    with pytest.warns(DeprecationWarning, match=r"^convert_memory\(strict=True\) is "
                      r"convert_memory\(host_staging=False\) now$") as caught:
        old = ab.convert.convert_memory(source, "numpy", "numpy", None, strict=True)
    assert caught[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = ab.convert.convert_memory(source, "numpy", "numpy", None, host_staging=False)
    assert np.shares_memory(old, source) and np.shares_memory(new, source)
    with pytest.raises(TypeError, match=r"convert_memory: give host_staging= only \(strict= is its old spelling\)"):
        ab.convert.convert_memory(source, "numpy", "numpy", None, strict=True, host_staging=False)


def test_mpi_buffer_host_staging_false_refuses_staging_and_strict_still_does():
    on_device = ab.to_device(np.arange(4.0), "opencl:0")  # memory MPI cannot reach: staged through the host
    with pytest.raises(ab.CopyRequiredError, match="which host_staging=False refuses"):
        with ab.mpi.buffer(on_device, "r", host_staging=False):
            pass
    with pytest.warns(DeprecationWarning, match=r"arraybridge.mpi.buffer\(strict=True\) is "
                      r"arraybridge.mpi.buffer\(host_staging=False\) now") as caught:
        with pytest.raises(ab.CopyRequiredError):
            with ab.mpi.buffer(on_device, "r", strict=True):
                pass
    assert caught[0].filename == __file__
    with ab.mpi.buffer(on_device, "r") as staged:  # allowed by default: one copy into host memory
        assert staged.device == "cpu" and staged.report.path == "device_to_host"
