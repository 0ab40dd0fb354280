"""Reaching NIXL: its Python API, imported when a Peer is made, and the one setting its
UCX cannot be given through NIXL. UCX chooses the modules it loads (UCX_MODULES) from
the process environment only, when the first agent loads it: NIXL's agent config and
its UCX backend's parameters (ucx_devices, num_workers, ucx_error_handling_mode) have
no such setting. So the caller asks for it (skip_infiniband); a Peer only warns."""
import os
import sys
import warnings

_NIXL_MODULES = ("nixl", "nixl_cu13", "nixl_cu12")
_IB_DEVICES = "/sys/class/infiniband"
_warned = []  # once per process: the warning is about the process's exit


def load_nixl():
    """NIXL's Python API (the `nixl` meta package, or a wheel for one CUDA major). Refused
    after TensorFlow: both bundle gRPC, and the second to register its flags aborts the
    process ("Flag 'grpc_experiments' was defined more than once"); NIXL first is fine."""
    import importlib
    if "tensorflow" in sys.modules and not any(name in sys.modules for name in _NIXL_MODULES):
        raise ImportError("arraybridge.nixl: NIXL cannot be imported after TensorFlow: both bundle gRPC, and "
                          "importing the second aborts the process. Import arraybridge.nixl (or make a Peer, or "
                          "call arraybridge.ray.register) before TensorFlow")
    problems = []
    for name in _NIXL_MODULES:
        try:
            return importlib.import_module(name)
        except ImportError as error:
            problems.append(f"{name}: {error}")
    raise ImportError("arraybridge.nixl needs NIXL's Python API, which is not installed "
                      f"({'; '.join(problems)}): pip install --no-deps nixl-cu12 (it needs only NumPy)")


def nixl_available():
    """Whether NIXL's Python API can be imported here (arraybridge.nixl needs it)."""
    try:
        load_nixl()
        return True
    except ImportError:
        return False


def _infiniband_unused():
    """UCX would load its InfiniBand module (the caller chose no UCX_MODULES), and the
    machine has no InfiniBand device for it to drive."""
    return "UCX_MODULES" not in os.environ and not (os.path.isdir(_IB_DEVICES) and os.listdir(_IB_DEVICES))


def skip_infiniband():
    """Keeps UCX from loading its InfiniBand module in this process where the machine
    has no InfiniBand device, by setting UCX_MODULES=^ib in os.environ (processes started
    afterwards inherit it). Without it, nixl-cu12's UCX crashes the process at exit on
    such a machine (SIGSEGV in libnl-route's destructor, nixl-cu12 1.5). UCX reads the
    variable when the first Peer loads it: call this before the first Peer. A
    UCX_MODULES already set, or an InfiniBand device present, is left alone. Returns
    whether it set the variable."""
    if not _infiniband_unused():
        return False
    os.environ["UCX_MODULES"] = "^ib"
    return True


def warn_of_infiniband():
    """A RuntimeWarning, once per process, where UCX is about to load an InfiniBand module
    with no device for it: the process would crash at exit, and only the caller may set
    the environment that prevents it."""
    if _warned or not _infiniband_unused():
        return
    _warned.append(True)
    warnings.warn("arraybridge.nixl: this machine has no InfiniBand device and UCX_MODULES is not set, so UCX "
                  "loads its InfiniBand module, which crashes the process at exit (nixl-cu12's UCX: SIGSEGV in "
                  "libnl-route). Call arraybridge.nixl.skip_infiniband() before the first Peer, or set "
                  "UCX_MODULES=^ib", RuntimeWarning, stacklevel=3)
