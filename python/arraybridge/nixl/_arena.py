"""Registered memory: each NIXL peer keeps arenas of memory registered with its agent
once (host memory from the pinned pool where CUDA is present, VRAM from the device
cache where UCX reaches it), because registering a buffer is expensive. A tensor of any
framework is packed by the runtime into a slot cut from an arena, and read into a slot
of the receiver's, then unpacked where asked."""
import threading

from .._lib import _core
from ._wire import nbytes_of, round_up

_BLOCK_BYTES = 64 << 20  # an arena grows by at least this much: one registration serves many slots
ALIGN = 4096  # slots start on page boundaries (what RDMA registration works in)


class _Block:
    """One registered allocation: `base` is its address, `keep` what owns the memory,
    `free` its unused (offset, size) ranges in address order."""

    def __init__(self, base, size, keep, reg):
        self.base, self.size, self.keep, self.reg = base, size, keep, reg
        self.free = [(0, size)]


class _Slot:
    __slots__ = ("block", "offset", "nbytes", "address")

    def __init__(self, block, offset, nbytes):
        self.block, self.offset, self.nbytes, self.address = block, offset, nbytes, block.base + offset


class Arena:
    """Memory of one kind (NIXL's "DRAM", or "VRAM" of one CUDA device) registered with the
    agent in blocks that are kept: a slot is cut from a block, and a block is added (and
    registered, which `registrations` counts) only when no free range is large enough."""

    def __init__(self, peer, mem, device_id):
        self.peer, self.mem, self.device_id = peer, mem, device_id
        self.blocks = []
        self.registrations = 0
        self.slots_in_use = 0
        self.lock = threading.Lock()  # sends and receives may come from several threads

    def take(self, nbytes):
        with self.lock:
            return self._take(round_up(max(nbytes, 1), ALIGN))

    def _take(self, size):
        for block in self.blocks:
            for i, (offset, free) in enumerate(block.free):
                if free >= size:
                    block.free[i:i + 1] = [(offset + size, free - size)] if free > size else []
                    self.slots_in_use += 1
                    return _Slot(block, offset, size)
        block = self._grow(max(size, _BLOCK_BYTES))
        block.free = [(size, block.size - size)] if block.size > size else []
        self.slots_in_use += 1
        return _Slot(block, 0, size)

    def give_back(self, slot):
        with self.lock:
            self._give_back(slot)

    def _give_back(self, slot):
        free = slot.block.free
        free.append((slot.offset, slot.nbytes))
        free.sort()
        merged = [free[0]]
        for offset, size in free[1:]:
            last_offset, last_size = merged[-1]
            if last_offset + last_size == offset:
                merged[-1] = (last_offset, last_size + size)
            else:
                merged.append((offset, size))
        slot.block.free = merged
        self.slots_in_use -= 1

    def _grow(self, size):
        keep, base = (self._vram(size) if self.mem == "VRAM" else self._host(size))
        reg = self.peer._call(self.peer._agent.register_memory, [(base, size, self.device_id, "")], self.mem)
        self.registrations += 1
        block = _Block(base, size, keep, reg)
        self.blocks.append(block)
        return block

    @staticmethod
    def _host(size):
        """Page-aligned host memory: from the pinned pool where a CUDA device is present
        (what a copy from or to the GPU wants), else a NumPy allocation."""
        import numpy as np
        if any(d.name == "cuda_host" for d in _devices()):
            pinned = _core.to_device(np.empty(size, np.uint8), "cuda_host")
            array = np.from_dlpack(pinned)
            if array.ctypes.data % ALIGN == 0:
                return (pinned, array), array.ctypes.data
        raw = np.empty(size + ALIGN, np.uint8)
        start = -raw.ctypes.data % ALIGN
        array = raw[start:start + size]
        return (raw, array), array.ctypes.data

    def _vram(self, size):
        """Device memory from the device cache, viewed through torch for slicing."""
        import numpy as np
        import torch
        block = _core.to_device(np.zeros(size, np.uint8), f"cuda:{self.device_id}")
        view = torch.from_dlpack(block)
        return (block, view), view.data_ptr()

    def view(self, slot, dtype, shape, at=0):
        """The slot's bytes from `at` on as a compact array of `dtype` and `shape` (NumPy
        on the host, torch on a GPU), for the runtime to pack into or unpack from."""
        start = slot.offset + at
        raw = slot.block.keep[1][start:start + nbytes_of(dtype, shape)]
        if self.mem == "VRAM":
            import torch
            return raw.view(getattr(torch, dtype)).view(shape)
        import numpy as np
        if dtype == "bfloat16":  # NumPy has none (ml_dtypes' exports no DLPack): torch views the same bytes
            import torch
            return torch.from_numpy(raw).view(torch.bfloat16).view(shape)
        return raw.view(np.dtype(dtype)).reshape(shape)

    def release(self):
        for block in self.blocks:
            try:
                self.peer._call(self.peer._agent.deregister_memory, block.reg)
            except Exception:  # closing: the agent may already refuse; the memory goes with the block
                pass
        self.blocks = []


def _devices():
    from .._device import devices
    return devices()

