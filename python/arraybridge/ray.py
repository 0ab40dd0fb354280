"""arraybridge.ray: Ray Direct Transport (RDT) for any framework's arrays.

Ray's own transports move torch tensors only. This registers one transport per
framework (Ray takes one data type per transport): an actor method marked with it
keeps the arrays it returns where they are, and the actor that receives the
ObjectRef reads them straight from the sender's memory over NIXL (a one-sided READ
from memory registered once, arraybridge.nixl), with no trip through Ray's object
store; CUDA arrays within a node go by IPC handles instead. Two lines turn it on:

    arraybridge.ray.register()                      # in the driver, before the actors
    @ray.method(tensor_transport=arraybridge.ray.transport("jax"))   # registers JAX's, if not yet

Every guarantee of to_device holds: exact values and the source's dtype (strided
views packed, never narrowed: JAX without x64 refuses 64-bit data), read-only
sources read-only at the receiver (NumPy; JAX and TensorFlow arrays are immutable),
a structure's arrays moved as one batch (one READ). The receiver chooses the
device: by default the one its framework uses (torch's default device, JAX's first
device, CuPy's current GPU, pyclesperanto's OpenCL device, else the CPU);
receive_on() picks another. A torch tensor that requires grad arrives requiring
grad, as a leaf of the receiver's own (Ray's object store keeps it for leaves). The
sender's packed copy is freed when Ray collects the object; a sender that dies makes
the read raise PeerLostError. Ray is imported on first use and is never a
dependency of the package.
"""
import dataclasses
import importlib
import os
import sys
import threading
import uuid

import numpy as np

__all__ = ["register", "transport", "receive_on", "setup_worker", "TRANSPORTS"]

# Our transport of each framework: its name in Ray, the module of its array type.
TRANSPORTS = {"numpy": "AB_NUMPY", "torch": "AB_TORCH", "jax": "AB_JAX", "cupy": "AB_CUPY",
              "tensorflow": "AB_TENSORFLOW", "pyclesperanto": "AB_PYCLESPERANTO", "arraybridge": "AB_TENSOR"}
# Registered by default: NumPy's and ours, and each other framework's where it is
# imported already. Ray unpickles every registered transport's array type in every
# actor it creates, so a framework registered is a framework imported there (torch
# and JAX take seconds, TensorFlow 15 s on 2 cores, pyclesperanto opens OpenCL).
_BY_DEFAULT = ("numpy", "arraybridge")

_lock = threading.Lock()
# This process's NIXL peer, the receiving device per framework, and the reads done by IPC.
_state = {"peer": None, "devices": {}, "ipc_reads": 0}
_published = {}  # obj_id -> the publish() handle, until Ray collects the object
_aborted = {}  # obj_id -> the threading.Events of its reads under way, which abort_transport sets
_register_lock = threading.Lock()
_capable = set()  # the ids of actors known to have our transport, kept for this process's life (an id each)


def transport(framework):
    """The tensor_transport name for `framework`'s arrays ("numpy", "torch", "jax",
    "cupy", "tensorflow", "pyclesperanto", or "arraybridge" for arraybridge Tensors),
    registered with Ray in this process first where Ray is imported and it is not yet
    (ray.method checks its transport when the class is defined: register() before the
    framework's import left it out, and Ray said only "Invalid tensor transport")."""
    name = _name(framework)
    if "ray" in sys.modules:
        register([framework])
    return name


def _name(framework):
    try:
        return TRANSPORTS[framework]
    except KeyError:
        raise ValueError(f"arraybridge.ray: no transport for {framework!r}; frameworks: "
                         f"{', '.join(TRANSPORTS)}") from None


# The kinds of memory each framework's arrays live in (None: any); receive_on refuses
# the others at once rather than fail the first read that lands there.
_HOLDS = {"numpy": ("cpu", "cuda_host"), "torch": ("cpu", "cuda"), "jax": ("cpu", "cuda"), "cupy": ("cuda",),
          "tensorflow": ("cpu", "cuda"), "pyclesperanto": ("opencl",), "arraybridge": None}


def receive_on(device, framework=None):
    """Arrays received in this process land on `device` ("cpu", "cuda:1", "opencl:0"),
    for one framework or (framework=None) each framework whose arrays live in that
    kind of memory (arraybridge Tensors in any); None goes back to the framework's own.
    A framework that cannot hold such arrays (NumPy on "opencl:0") is a ValueError."""
    from ._device import device_string, parse_device
    kind = device_string(*parse_device(device)).partition(":")[0] if device is not None else None
    if framework is not None:
        _name(framework)
        if kind is not None and _HOLDS[framework] is not None and kind not in _HOLDS[framework]:
            raise ValueError(f"arraybridge.ray: {framework} arrays cannot live in {kind} memory (they hold "
                             f"{' or '.join(_HOLDS[framework])}): receive {framework} on one of those, or "
                             f"arraybridge Tensors (receive_on({device!r}, 'arraybridge'))")
    names = [framework] if framework else [f for f, holds in _HOLDS.items() if kind is None or holds is None
                                               or kind in holds]
    for name in names:
        if device is None:
            _state["devices"].pop(name, None)
        else:
            _state["devices"][name] = device


def register(frameworks=None):
    """Registers our transports with Ray, for `frameworks` (default: NumPy's and
    arraybridge Tensors', and each other framework's that this process imported
    already). Call it in the driver before creating the actors, and where the actors'
    class is defined (ray.method checks its transport then): Ray registers the same
    transports on each actor it creates, importing each framework there. Calling it
    again registers what is missing only. Returns {framework: transport name}."""
    from ray.experimental import register_tensor_transport
    from ray.experimental.rdt import util
    names = list(frameworks) if frameworks is not None else \
        [f for f in TRANSPORTS if f in _BY_DEFAULT or f in sys.modules]
    if "tensorflow" in names:  # NIXL before TensorFlow: imported the other way, their gRPCs abort the process
        from .nixl._load import load_nixl
        load_nixl()
    done = {}
    with _register_lock:  # what Ray knows, read and added to by one thread at a time
        with util.transport_managers_lock:
            known = set(util.transport_manager_info)
        for framework in names:
            name = _name(framework)
            if name not in known:
                register_tensor_transport(name, ["cpu", "cuda"], _MANAGERS[framework], _array_type(framework))
            done[framework] = name
    return done


def setup_worker():
    """Ray's worker_process_setup_hook for TensorFlow's transport: loads NIXL as each
    worker starts, before Ray's registration imports TensorFlow there (the two bundle
    gRPC, and NIXL imported second aborts the process):
    ray.init(runtime_env={"worker_process_setup_hook": "arraybridge.ray.setup_worker"})."""
    from .nixl._load import load_nixl
    load_nixl()


def _array_type(framework):
    """The concrete class of `framework`'s arrays: Ray picks arrays out of a return value
    by their exact type."""
    if framework == "numpy":
        return importlib.import_module("numpy").ndarray
    if framework == "torch":
        return importlib.import_module("torch").Tensor
    if framework == "jax":
        return type(importlib.import_module("jax.numpy").zeros(()))
    if framework == "cupy":
        return importlib.import_module("cupy").ndarray
    if framework == "tensorflow":
        return type(importlib.import_module("tensorflow").constant(0))
    if framework == "pyclesperanto":
        from ._seed import _pyclesperanto
        return type(_pyclesperanto().create((1,)))
    from ._tensor import Tensor
    return Tensor


def _peer():
    """This process's NIXL peer: made on first use, listening on this node's address."""
    with _lock:
        if _state["peer"] is None:
            from .nixl import Peer
            host = "127.0.0.1"
            try:
                import ray
                host = ray.util.get_node_ip_address()
            except Exception:  # noqa: BLE001 - outside Ray (a test): this machine only
                pass
            _state["peer"] = Peer(f"arraybridge-ray-{os.getpid()}-{uuid.uuid4().hex[:8]}", listen=(host, 0))
        return _state["peer"]


def _node():
    """This process's node, as Ray names it (IPC handles open only on the node that made them)."""
    try:
        import ray
        return ray.get_runtime_context().get_node_id()
    except Exception:  # noqa: BLE001 - outside Ray (a test): this machine's boot
        with open("/proc/sys/kernel/random/boot_id") as boot:
            return boot.read().strip()


def _publish(arrays):
    """((NIXL handle, IPC copies), publication) of an actor method's returned arrays: the
    NIXL publication any receiver can READ, and for arrays on one CUDA GPU also IPC handles
    of compact private copies, which a receiver on this node opens instead (no trip
    through host memory or the network). The copies live until Ray collects the object."""
    from ._errors import ArrayBridgeError
    from ._lib import _core
    from ._tensor import Tensor
    tensors = [x if isinstance(x, Tensor) else _imported(x, index, len(arrays)) for index, x in enumerate(arrays)]
    handle, publication = _peer().publish(tensors)
    # What autograd had (a torch receiver's tensors require grad where the sender's did,
    # as through Ray's object store), which the bytes cannot say.
    for entry, x in zip(publication["tensors"], arrays):
        if getattr(x, "requires_grad", False) is True:
            entry["requires_grad"] = True
    devices = {tensor.device for tensor in tensors}
    copies = []
    if len(devices) == 1 and devices.pop().startswith("cuda:"):
        try:
            copies = _core.to_device_many(tensors, tensors[0].device, copy=True)
            # An empty array has no memory to name: its receiver makes it from the shape.
            handles = [None if 0 in copy.shape else _core.ipc_export(copy, None).hex() for copy in copies]
        except ArrayBridgeError:  # memory IPC cannot name (stream-ordered pools): the READ serves every receiver
            copies = []
        except BaseException:
            _peer().withdraw(handle)
            raise
        else:
            publication = dict(publication, ipc={"node": _node(), "handles": handles})
    return (handle, copies), publication


def _imported(x, index, count):
    """x (the index-th of the count arrays a method returned) as a Tensor, or the refusal
    naming which array it was: Ray hands over the arrays of a structure without its keys."""
    from ._errors import DLPackError
    from ._lib import _core
    try:
        return _core.from_dlpack(x)
    except (BufferError, TypeError) as error:
        what = f"a {type(x).__module__}.{type(x).__qualname__}"
        if getattr(x, "dtype", None) is not None and getattr(x, "shape", None) is not None:
            what += f" of {x.dtype}, shape {tuple(x.shape)}"
        why = str(error)
        if why.startswith("arraybridge: x ("):  # a producer's refusal, restated naming x: said here of array {index}
            why = why.partition(" cannot go through DLPack: ")[2] or why
        message = f"arraybridge.ray: array {index} of the {count} the method returned ({what}) cannot be sent: {why}"
        if isinstance(error, TypeError):
            raise TypeError(message) from error
        raise DLPackError(message, getattr(error, "status", None), getattr(error, "status_name", None)) from error


def _read_by_ipc(publication, device, read_only):
    """The published arrays copied from the sender's IPC copies onto `device`, or None where
    there are none, the sender is on another node, or this process cannot open them (its
    GPUs are others, or the sender has gone): then the NIXL READ, which says which."""
    from ._errors import ArrayBridgeError
    from ._lib import _core
    ipc = publication.get("ipc")
    if ipc is None or ipc["node"] != _node():
        return None
    entries = publication["tensors"]
    try:
        opened = [None if handle is None else _core.ipc_import(bytes.fromhex(handle)) for handle in ipc["handles"]]
        moved = iter(_core.to_device_many([t for t in opened if t is not None], device, copy=True))
        results = [next(moved) if tensor is not None else
                   _core.to_device(np.empty(entry["shape"], np.uint8), device, dtype=entry["dtype"])
                   for tensor, entry in zip(opened, entries)]
    except ArrayBridgeError:
        return None
    del opened  # the mappings close once the copies are done (they are: the calls returned)
    with _lock:
        _state["ipc_reads"] += 1
    return [_marked(tensor, read_only and entry["read_only"]) for tensor, entry in zip(results, entries)]


def _marked(tensor, read_only):
    """`tensor`, or (read_only) its one view that says it is read-only."""
    from ._lib import _core
    return _core.from_dlpack(_core.export(tensor, False, False)) if read_only else tensor


def _receiving_device(framework):
    """Where received arrays of `framework` land: receive_on()'s choice, else the device its
    framework uses by default."""
    chosen = _state["devices"].get(framework)
    if chosen is not None:
        return chosen
    try:
        if framework == "torch":
            torch = sys.modules.get("torch") or importlib.import_module("torch")
            device = torch.get_default_device() if hasattr(torch, "get_default_device") else torch.device("cpu")
            if device.type == "cuda":
                return f"cuda:{device.index if device.index is not None else torch.cuda.current_device()}"
        elif framework == "jax":
            first = importlib.import_module("jax").devices()[0]
            if first.platform == "gpu":
                return f"cuda:{first.id}"
        elif framework == "cupy":
            return f"cuda:{importlib.import_module('cupy').cuda.Device().id}"
    except Exception:  # noqa: BLE001 - a framework that cannot say: the CPU
        pass
    return "cpu"


def _finish(framework, tensor, entry, index, count):
    """The received Tensor (the index-th of count) as `framework`'s array (no copy where it
    can hold it), described by its publication `entry`; a refusal names which array it was."""
    from . import _seed
    if framework == "arraybridge":
        return tensor
    if framework == "pyclesperanto":  # a copy into pyclesperanto's own context
        return _seed._into_pyclesperanto(tensor, _pyclesperanto_index(), True, None, None)
    target = _seed.MemoryType(framework)  # a read Tensor is compact: JAX and TensorFlow take it as it is
    if target is _seed.MemoryType.JAX:
        try:
            _seed._check_target_holds(tensor.dtype, target)  # never narrowed: refused
        except ValueError as error:
            raise ValueError(f"arraybridge.ray: array {index} of the {count} received ({tensor.dtype}, shape "
                             f"{tuple(tensor.shape)}) cannot be a jax array: {error}") from None
    array = _seed._framework_array(tensor, target, None)
    if entry.get("requires_grad") and target is _seed.MemoryType.TORCH:  # a leaf of the receiver's own
        array.requires_grad_()
    return array


def _pyclesperanto_index():
    cle = importlib.import_module("pyclesperanto")
    current = cle.get_device().name
    names = cle.list_available_devices()
    return names.index(current) if current in names else 0


def _ray_transport():
    """Ray's interface classes, imported on first use."""
    from ray.experimental.rdt.tensor_transport_manager import (CommunicatorMetadata, TensorTransportManager,
                                                               TensorTransportMetadata)
    return CommunicatorMetadata, TensorTransportManager, TensorTransportMetadata


def _metadata_class():
    """The metadata Ray ships from the sender to the receivers: Ray's own (shapes and
    dtypes) plus our publication (where the packed bytes are, and how to reach them)."""
    _, _, base = _ray_transport()

    @dataclasses.dataclass
    class ArraybridgeTransportMetadata(base):
        publication: dict = None

    ArraybridgeTransportMetadata.__module__ = __name__
    ArraybridgeTransportMetadata.__qualname__ = "ArraybridgeTransportMetadata"
    return ArraybridgeTransportMetadata


_made_lock = threading.RLock()  # one class per name, whichever thread asks first (pickles name that one)


def __getattr__(name):
    # Ray's classes exist only once Ray is imported: made then, and pickled by this name.
    if name != "ArraybridgeTransportMetadata" and name not in _MANAGER_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    with _made_lock:
        if name not in globals():
            globals()[name] = _metadata_class() if name == "ArraybridgeTransportMetadata" else \
                _manager_class(_MANAGER_NAMES[name])
        return globals()[name]


def _manager_class(framework):
    """The TensorTransportManager of `framework`'s transport (Ray makes one per process)."""
    communicator_metadata, manager_base, _ = _ray_transport()
    metadata_type = sys.modules[__name__].ArraybridgeTransportMetadata

    class Manager(manager_base):
        def tensor_transport_backend(self):
            return TRANSPORTS[framework]

        @staticmethod
        def is_one_sided():
            return True  # the receiver READs; the sender only publishes

        @staticmethod
        def can_abort_transport():
            return True

        def actor_has_tensor_transport(self, actor):
            # Ray asks before every call of a method on this transport, and asking is a
            # round trip to the actor (1-2 ms of a small transfer's 6-10), so a yes is
            # kept by the actor's id (a restarted actor keeps it, and its class); a no is
            # asked again.
            actor_id = getattr(actor, "_actor_id", None)
            if actor_id is not None and actor_id in _capable:
                return True
            import ray
            able = ray.get(actor.__ray_call__.options(concurrency_group="_ray_system").remote(_has_transport))
            if able and actor_id is not None:
                with _lock:
                    _capable.add(actor_id)
            return able

        def extract_tensor_transport_metadata(self, obj_id, rdt_object):
            handle, publication = _publish(rdt_object)
            with _lock:
                _published[obj_id] = handle
            shapes = [(tuple(entry["shape"]), entry["dtype"]) for entry in publication["tensors"]]
            return metadata_type(tensor_meta=shapes, tensor_device="cpu", publication=publication)

        def get_communicator_metadata(self, src_actor, dst_actor, backend=None):
            return communicator_metadata()

        def recv_multiple_tensors(self, obj_id, tensor_transport_metadata, communicator_metadata,
                                  target_buffers=None):
            abort = threading.Event()
            with _lock:
                _aborted.setdefault(obj_id, set()).add(abort)  # a threaded actor may read one object twice
            try:
                device = _receiving_device(framework)
                read_only = framework not in ("torch", "cupy")
                publication = tensor_transport_metadata.publication
                tensors = _read_by_ipc(publication, device, read_only)
                if tensors is None:
                    tensors = _peer().read(publication, device=device, abort=abort, read_only=read_only)
                return [_finish(framework, tensor, entry, index, len(tensors))
                        for index, (tensor, entry) in enumerate(zip(tensors, publication["tensors"]))]
            finally:
                with _lock:
                    reads = _aborted.get(obj_id, set())
                    reads.discard(abort)
                    if not reads:
                        _aborted.pop(obj_id, None)

        def send_multiple_tensors(self, tensors, tensor_transport_metadata, communicator_metadata):
            raise NotImplementedError("arraybridge's transports are one-sided: the receiver reads")

        def garbage_collect(self, obj_id, tensor_transport_meta, tensors):
            with _lock:
                handle = _published.pop(obj_id, None)
            if handle is not None:
                _peer().withdraw(handle[0])  # and the IPC copies go with handle[1]

        def abort_transport(self, obj_id, communicator_metadata):
            with _lock:
                reads = list(_aborted.get(obj_id, ()))
            for abort in reads:
                abort.set()

    name = f"Arraybridge{framework.capitalize()}Transport"
    Manager.__name__, Manager.__qualname__, Manager.__module__ = name, name, __name__
    return Manager


_MANAGER_NAMES = {f"Arraybridge{framework.capitalize()}Transport": framework for framework in TRANSPORTS}


class _Managers(dict):
    def __missing__(self, framework):
        _name(framework)
        return getattr(sys.modules[__name__], f"Arraybridge{framework.capitalize()}Transport")


_MANAGERS = _Managers()


def _has_transport(actor_self=None):
    """Run in an actor: whether arraybridge's transport can work there (NIXL importable)."""
    from .nixl import nixl_available
    return nixl_available()


def _stats():
    """This process's NIXL peer's counters (for tests: slots and registrations flat), and
    `ipc_reads`, the objects read by IPC handles instead."""
    return dict({} if _state["peer"] is None else _state["peer"].stats(), ipc_reads=_state["ipc_reads"])
