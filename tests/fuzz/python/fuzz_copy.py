"""Fuzz target: arraybridge.copy (one pair, a structure of pairs, copy_many) with
hand-made sources and destinations: capsules (legacy and versioned), producers,
NumPy arrays and Tensors on cpu and opencl:0; read-only, mismatched, strided and
overlapping destinations. Invariants: only documented exceptions; a successful
copy writes exactly the source's values into dst's elements and not one byte
beside them, and none succeeds into elements that share bytes; a failed one
writes nothing; every hand-made tensor taken is deleted
once, an untouched capsule never. Run by run.sh."""
import ctypes
import sys

import atheris

with atheris.instrument_imports(include=["harness", "arraybridge"]):
    import harness
    from harness import ab, hd, np

FILL = 0xA5  # a destination's bytes before the copy: what must stay beside its elements
DTYPES = [(2, 32, 1), (2, 64, 1), (0, 8, 1), (0, 32, 1), (1, 16, 1), (2, 16, 1), (6, 8, 1), (5, 64, 1)]


class Destination:
    """A hand-made destination tensor over host memory (its own, or the source's to
    overlap it): the byte offset of each element in `memory` is known, so the bytes
    beside them can be checked."""

    def __init__(self, fdp, shape, dtype, source_memory=None):
        self.versioned = harness.small_or(fdp, [True], [False])
        flags = harness.small_or(fdp, [0], [hd.READ_ONLY, hd.IS_COPIED, 1 << 7])
        shape = list(shape) if fdp.ConsumeIntInRange(0, 7) else self._other_shape(fdp, shape)
        self.dtype = dtype if fdp.ConsumeIntInRange(0, 3) else harness.pick(fdp, DTYPES + [(2, 32, 2), (3, 8, 1)])
        compact = fdp.ConsumeBool()
        strides = [harness.small_or(fdp, [1, 2, -1, 3], [0, -3, 7]) for _ in shape]
        if compact:
            strides, step = [0] * len(shape), 1
            for d in reversed(range(len(shape))):
                strides[d], step = step, step * shape[d]
        device = harness.small_or(fdp, [(hd.CPU, 0)], [(hd.CUDA_HOST, 0), (hd.OPENCL, 0), (99, 0), (hd.CPU, 1)])
        item = (self.dtype[1] * self.dtype[2] + 7) // 8
        numel = int(np.prod(shape))
        low = sum(min(0, (s - 1) * st) for s, st in zip(shape, strides)) * item if numel else 0
        high = sum(max(0, (s - 1) * st) for s, st in zip(shape, strides)) * item + item if numel else 0
        self.overlaps = source_memory is not None and high - low <= ctypes.sizeof(source_memory)
        if self.overlaps:
            self.memory = source_memory
            start = fdp.ConsumeIntInRange(0, ctypes.sizeof(source_memory) - (high - low))
        else:
            self.memory = (ctypes.c_uint8 * (high - low + 16))()
            ctypes.memset(self.memory, FILL, ctypes.sizeof(self.memory))
            start = fdp.ConsumeIntInRange(0, 4)
        # Each element's byte offset in memory, in row-major order of the shape.
        offsets = np.array([start - low], dtype=np.int64)
        for extent, stride in zip(shape, strides):
            offsets = (offsets[:, None] + np.arange(extent, dtype=np.int64) * stride * item).reshape(-1)
        self.offsets, self.item, self.shape = offsets, item, shape
        # Elements that share bytes (strides (1, 1) on 3 x 3): the runtime must refuse them.
        self.self_overlapping = bool(np.any(np.diff(np.sort(self.offsets)) < item))
        byte_offset = harness.small_or(fdp, [0], [8, 3])
        data = ctypes.addressof(self.memory) + start - low - byte_offset
        if device[0] not in (hd.CPU, hd.CUDA_HOST):
            data = None  # a device pointer of ours would be garbage to its backend: NULL fails loudly
        self.tensor = hd.Handmade(self.versioned, (1, 0), flags, data, device, len(shape), self.dtype, shape or [0],
                                  None if compact and fdp.ConsumeBool() else strides, byte_offset,
                                  has_deleter=bool(fdp.ConsumeIntInRange(0, 15)))
        self.writable = self.versioned and not flags & hd.READ_ONLY
        self.before = bytes(self.memory)

    @staticmethod
    def _other_shape(fdp, shape):
        shape = list(shape)
        change = fdp.ConsumeIntInRange(0, 2)
        if change == 0 or not shape:
            return shape + [harness.pick(fdp, [1, 2])]
        if change == 1:
            return shape[1:]
        shape[fdp.ConsumeIntInRange(0, len(shape) - 1)] += harness.pick(fdp, [1, -1])
        return [max(s, 0) for s in shape]

    @property
    def name(self):
        return hd.VERSIONED if self.versioned else hd.LEGACY

    def elements(self):
        """What dst's elements hold now, as NumPy reads them (None: a dtype NumPy lacks)."""
        numpy_type = harness._NUMPY.get(self.dtype[:2])
        if numpy_type is None or self.dtype[2] != 1:
            return None
        raw = np.frombuffer(self.memory, dtype=np.uint8)
        picked = raw[self.offsets[:, None] + np.arange(self.item)] if len(self.offsets) else raw[:0]
        return picked.reshape(-1).view(numpy_type).reshape(self.shape)

    def check_beside(self, source_bytes=None):
        """Every byte that is not one of dst's elements is what it was."""
        now = np.frombuffer(bytes(self.memory), dtype=np.uint8).copy()
        before = np.frombuffer(self.before, dtype=np.uint8).copy()
        if len(self.offsets):
            mask = (self.offsets[:, None] + np.arange(self.item)).reshape(-1)
            now[mask] = before[mask] = 0
        assert now.tobytes() == before.tobytes(), "the copy wrote beside the destination's elements"


def draw_source(fdp):
    """(the object passed as src, its Source or None, the capsules it made, the values it must read as)."""
    kind = harness.small_or(fdp, ["capsule", "producer"], ["numpy", "opencl", "numpy read-only"])
    if kind.startswith("numpy") or kind == "opencl":
        shape = [harness.pick(fdp, [0, 1, 2, 3]) for _ in range(fdp.ConsumeIntInRange(0, 3))]
        array = (np.arange(int(np.prod(shape)), dtype=np.float32) * 1.5 - 2).reshape(shape)
        array.setflags(write=kind != "numpy read-only")
        return (ab.to_device(array, "opencl:0") if kind == "opencl" else array), None, [], array
    source = harness.Source(fdp)
    if kind == "capsule":
        capsule = source.tensor.capsule()
        return capsule, source, [capsule], source.expected
    made = []

    def make():
        made.append(source.tensor.capsule())
        return made[-1]

    return hd.Producer(make, keywords=fdp.ConsumeBool()), source, made, source.expected


def draw_destination(fdp, src_values, source):
    """(the object passed as dst, its Destination or None, the capsules it made, a reader of its values)."""
    shape = list(src_values.shape) if src_values is not None else [harness.pick(fdp, [1, 2]) for _ in range(2)]
    kind = harness.small_or(fdp, ["capsule", "capsule", "producer"], ["numpy", "opencl", "overlap", "numpy read-only"])
    array = None
    if kind.startswith("numpy") or kind == "opencl":
        try:
            array = np.full([s * 2 for s in shape], 7, dtype=np.float32)
        except (ValueError, MemoryError):  # an empty source's shape may be too large for NumPy to double
            kind = "capsule"
    if array is not None:
        view = array[tuple(slice(None, None, 2) for _ in shape)] if fdp.ConsumeBool() else array[tuple(slice(0, s) for s in shape)]
        array.setflags(write=kind != "numpy read-only")
        if kind == "opencl":
            tensor = ab.to_device(np.ascontiguousarray(view), "opencl:0")
            return tensor, None, [], lambda: harness.host_values(tensor)
        return view, None, [], lambda: view
    memory = source.memory if kind == "overlap" and source is not None and source.memory is not None else None
    dtype = source.tensor.managed.dl_tensor.dtype if source is not None else None
    dtype = (dtype.code, dtype.bits, dtype.lanes) if dtype is not None else (2, 32, 1)
    dest = Destination(fdp, shape, dtype, memory)
    if kind != "producer":
        capsule = dest.tensor.capsule()
        return capsule, dest, [capsule], dest.elements
    made = []

    def make():
        made.append(dest.tensor.capsule())
        return made[-1]

    return hd.Producer(make, keywords=fdp.ConsumeBool()), dest, made, dest.elements


def check_pair(copied, pair):
    src, source, src_made, values, dst, dest, dst_made, read = pair
    if dest is not None and not copied:
        assert bytes(dest.memory) == dest.before, "a refused copy wrote into the destination"
    if copied:
        assert dest is None or dest.writable, "copy wrote into a read-only destination"
        assert not (isinstance(dst, np.ndarray) and not dst.flags.writeable), "copy wrote into a read-only array"
        assert dest is None or not dest.self_overlapping, "copy wrote into a destination whose elements share bytes"
        if dest is not None:
            dest.check_beside()
        got = read()
        if values is not None and got is not None:
            assert tuple(got.shape) == tuple(values.shape), (got.shape, values.shape)
            if np.can_cast(values.dtype, got.dtype, "safe") and values.dtype.kind != "c":
                assert np.array_equal(got, values.astype(got.dtype), equal_nan=got.dtype.kind == "f"), \
                    "dst's elements are not the source's values"


def check_owned(capsules, tensor_owner, untouched):
    """Each capsule handed over is untouched or consumed, and the tensor deleted once."""
    for capsule in capsules:
        harness.check_capsule(capsule, tensor_owner, untouched)
    if capsules:
        harness.check_deleter(tensor_owner)
        assert not tensor_owner.tensor.called_with_error, "a deleter was called with an exception set"


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    pairs = []
    for _ in range(harness.small_or(fdp, [1], [2, 3])):
        src, source, src_made, values = draw_source(fdp)
        dst, dest, dst_made, read = draw_destination(fdp, values, source)
        pairs.append((src, source, src_made, values, dst, dest, dst_made, read))
    call = harness.small_or(fdp, ["copy"], ["copy_many", "structure"]) if len(pairs) > 1 else "copy"
    strict = harness.small_or(fdp, [False, True], [None, 0, "yes"])
    non_blocking = harness.small_or(fdp, [False, True], [None, 1])
    copied, event = False, None
    srcs, dsts = [p[0] for p in pairs], [p[4] for p in pairs]
    try:
        if call == "copy":
            event = ab.copy(srcs[0], dsts[0], strict=strict, non_blocking=non_blocking)
        elif call == "structure":
            event = ab.copy(srcs, dsts, strict=strict, non_blocking=non_blocking)
        else:
            event = ab.copy_many(srcs, dsts, strict=strict, non_blocking=non_blocking)
        copied = True
    except Exception as error:
        harness.check_exception(error)
    if event is not None:
        event.wait()
        del event
    handed = pairs[:1] if call == "copy" else pairs  # copy takes the first pair; the others stay ours
    for pair in handed:
        check_pair(copied, pair)
    for number, (src, source, src_made, values, dst, dest, dst_made, read) in enumerate(pairs):
        untouched = number >= len(handed)
        if source is not None:
            check_owned(src_made, source, untouched)
        if dest is not None:
            check_owned(dst_made, dest, untouched)

if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
