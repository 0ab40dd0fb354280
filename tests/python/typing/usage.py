"""Every public name of arraybridge called as README.md and docs/GUIDE.md show it, for
`mypy --strict` against the installed package's stubs (test_typing.py). It is type
checked, not run: it names devices and peers this machine may not have."""
import threading

import numpy as np

import arraybridge as ab
import arraybridge.ray as abray
from arraybridge import convert, mpi, nixl


def transfers(a: "np.ndarray[tuple[int, int], np.dtype[np.float64]]") -> None:
    t: ab.Tensor = ab.to_device(a.T, "opencl:0")
    back = np.from_dlpack(ab.to_device(t, "cpu"))
    assert (back == a.T).all()
    report: ab.TransferReport = t.report
    print(report.path, report.bytes_moved, report.packed, report.cast, report.detail)
    print(t.shape, t.strides, t.ndim, t.dtype, t.itemsize, t.device, t.data_ptr, t.byte_offset, t.size, t.nbytes,
          t.read_only, t.__dlpack_device__())
    queued = ab.to_device(a, ("cuda", 0)[0], non_blocking=True, copy=True, dtype="float32", contiguous="nonnegative")
    if not queued.is_ready():
        queued.wait()
    same: ab.Tensor = t.to("cpu", copy=True)
    batch: dict[str, list[ab.Tensor]] = ab.to_device({"w": [t, same]}, ab.devices()[0])
    many: list[ab.Tensor] = ab.to_device_many([a, a], "cpu", host_staging=False)
    event: ab.Event | None = ab.copy(a, np.empty_like(a), non_blocking=True)
    if event is not None:
        event.wait()
    ab.copy_many([a], [np.empty_like(a)], casting="safe")
    try:
        ab.copy(a, np.empty(a.shape, np.int32))
    except ab.CastingError as refused:  # float64 into int32: a copy's default (same_kind) refuses it
        ab.copy(a, np.empty(a.shape, np.int32), casting="unsafe")
        print(refused.status_name)
    view: ab.Tensor = ab.from_dlpack(a, copy=False)
    print(batch, many, view, ab.__version__)


def devices_and_memory() -> None:
    listed: list[ab.Device] = ab.devices()
    for device in listed:
        kind: int = device.dlpack[0]
        assert ab.to_device(np.zeros(1), (ab.DLDeviceType.CPU, 0)).device == "cpu" or kind
        print(device.name, kind, device.label, device.memory_bytes, device.shares_host_memory, device.lost)
    infos: list[ab.BackendInfo] = ab.backends()
    for backend in infos:
        print(backend.name, backend.available, backend.device_count, backend.detail)
    print(ab.pool_stats()["bytes_pinned"], ab.pool_trim(), ab.device_cache_stats()["hits"])
    ab.set_device_cache_limit(1 << 30)
    ab.set_staging(threads=2, chunk_bytes=4 << 20)
    with ab.recording() as rec:
        ab.to_device(np.zeros(4), "cpu")
    print(rec.table(), len(rec), rec.rows()[0].reasons)
    again = ab.Recording.merged([ab.Recording.from_json(rec.to_json()), rec])
    record: ab.TransferRecord = again.records[0]
    print(record.call, record.bytes, record.seconds, ab.Recording(again.records).merge(rec))


def between_processes(t: ab.Tensor) -> None:
    handle: ab.IpcHandle = t.ipc_handle()
    other = ab.from_ipc(bytes(handle))
    print(ab.from_ipc(ab.ipc_handle(other, stream=None)))


def errors(a: "np.ndarray[tuple[int], np.dtype[np.float64]]") -> None:
    try:
        ab.to_device(a, "cuda:0", copy=False)
    except ab.CopyRequiredError as error:
        print(error.status, error.status_name)
    except (ab.DLPackError, ab.DeviceError, ab.InvalidArgumentError, ab.OutOfMemoryError, ab.StreamError) as error:
        print(error)
    except ab.ArrayBridgeError:
        raise
    try:
        convert.convert_memory(a, "numpy", "jax", gpu_id=None)
    except ab.MemoryConversionError as error:
        print(error.source_type, error.target_type, error.method, error.reason)
    except ab.PeerLostError:
        pass


def seed_api(a: "np.ndarray[tuple[int], np.dtype[np.float64]]") -> None:
    kind: convert.MemoryType = convert.detect_memory_type(a)
    assert kind in convert.SUPPORTED_MEMORY_TYPES and convert.CPU_MEMORY_TYPES | convert.GPU_MEMORY_TYPES
    print(convert.convert_memory(a, convert.MemoryType.NUMPY, "torch", 0, host_staging=False, dtype="float32"))
    print(convert.convert_memory({"w": a}, "numpy", "numpy", None, copy=True))
    try:
        convert.convert_memory(a, "numpy", "jax", None)
    except convert.MemoryConversionError:
        pass


def mpi_buffers(t: ab.Tensor) -> None:
    print(mpi.cuda_aware())
    with mpi.buffer(t, "w", cuda_aware=False, host_staging=False) as buffer:
        print(buffer.report.path)


def nixl_peers(kv_cache: "np.ndarray[tuple[int], np.dtype[np.float32]]") -> None:
    if not nixl.nixl_available():
        return
    nixl.skip_infiniband()
    with nixl.Peer("prefill", listen=("0.0.0.0", 5555), timeout=10.0) as peer:
        decode: str = peer.peers(wait_for=1)[0]
        sent: nixl.Transfer = peer.send(kv_cache, to=decode, dtype="float16")
        sent.wait()
        got = peer.recv(decode, device="cpu").wait(timeout=5.0)
        print(got, sent.done(), peer.stats()["registrations"], peer.address, peer.connect(("10.0.0.2", 5555)))
        handle, description = peer.publish([kv_cache])
        tensors: list[ab.Tensor] = peer.read(description, device="cpu", abort=threading.Event())
        peer.withdraw(handle)
        print(tensors)
    try:
        peer.close()
    except nixl.PeerLostError:
        pass


def ray_actors() -> None:
    names: dict[str, str] = abray.register()
    print(names, abray.register(["jax"]), abray.transport("numpy"), abray.TRANSPORTS)
    abray.receive_on("cuda:1", "torch")
    abray.receive_on(None)
    abray.setup_worker()
