"""What the IPC tests run in other processes: multiprocessing's spawn start method
imports this module there. Each worker puts one tuple on `results`: ("ok", ...) or
("error", exception class name, message), and what the fake CUDA driver found in
that process (stream-ordered races, bad closes) as its last item."""
import ctypes
import gc
import os


def fake_findings():
    fake = ctypes.CDLL(os.environ["ARRAYBRIDGE_CUDA_LIBRARY"])
    fake.fake_cuda_stat.restype = ctypes.c_longlong
    fake.fake_cuda_finding.restype = ctypes.c_char_p
    return [fake.fake_cuda_finding(n).decode() for n in range(fake.fake_cuda_stat(b"findings"))]


def fake_stat(name):
    fake = ctypes.CDLL(os.environ["ARRAYBRIDGE_CUDA_LIBRARY"])
    fake.fake_cuda_stat.restype = ctypes.c_longlong
    return fake.fake_cuda_stat(name.encode())


def open_and_write(handle, new_values, results):
    """Imports the handle twice, reads it, writes `new_values` into it (when given),
    and lets go of both imports."""
    import numpy as np
    import arraybridge as ab
    try:
        first, second = ab.from_ipc(handle), ab.from_ipc(handle)
        seen = np.from_dlpack(ab.to_device(first, "cpu")).copy()
        facts = {"device": first.device, "path": first.report.path, "one_mapping": first.data_ptr == second.data_ptr,
                 "shape": first.shape, "dtype": str(first.dtype)}
        if new_values is not None:
            ab.copy(new_values, first)
        del first, second
        gc.collect()
        ab.pool_trim()  # waits for the deferred closes
        facts["mappings_left"] = fake_stat("device_allocations")
        results.put(("ok", seen, facts, fake_findings()))
    except Exception as error:  # reported to the test, which names it
        results.put(("error", type(error).__name__, str(error), fake_findings()))


def export_and_exit(results):
    """Exports a CUDA tensor, hands over the handle, and exits: its memory goes with it."""
    import numpy as np
    import arraybridge as ab
    tensor = ab.to_device(np.arange(16, dtype=np.float32), "cuda:0")
    results.put(("ok", tensor.ipc_handle(), None, fake_findings()))


def open_in_framework(handle, framework, results):
    """On a GPU: the handle opened, handed to `framework` zero-copy, read, passed
    through convert_memory (zero-copy on the same GPU) and incremented in place there."""
    import importlib
    import numpy as np
    import arraybridge as ab
    try:
        module = importlib.import_module(framework)
        tensor = ab.from_ipc(handle)
        x = ab.convert.convert_memory(module.from_dlpack(tensor), framework, framework, gpu_id=0)
        seen = x.cpu().numpy().copy() if framework == "torch" else module.asnumpy(x)
        x += 1
        (module.cuda.synchronize() if framework == "torch" else module.cuda.runtime.deviceSynchronize())
        del x, tensor
        results.put(("ok", seen, None))
    except Exception as error:
        results.put(("error", None, f"{type(error).__name__}: {error}"))
