"""What users pass and do first: a torch state dict (an OrderedDict), a namedtuple
batch, a flipped image (img[..., ::-1]) into torch, a batch with one bad array in
it, and a copy into a tensor autograd saved. Each gets exact values or a clear error
naming what was wrong and where, never a wrong value."""
import collections
import importlib.util
import pathlib

import numpy as np
import pytest

import arraybridge as ab
from test_cuda_fake import run_with_fake_cuda

HAVE_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is installed by `make test`; run it through make")


# ------------------------------------------------------------------ structures

def state_dict():
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    return model.state_dict()


@needs_torch
def test_a_state_dict_moves_as_one_structure_and_comes_back_a_state_dict():
    sd = state_dict()
    for device in ("cpu", "opencl:0"):
        moved = ab.to_device(sd, device)
        assert type(moved) is collections.OrderedDict and list(moved) == list(sd)
        assert moved._metadata == sd._metadata  # what load_state_dict reads, kept
        for key, value in sd.items():
            back = np.from_dlpack(ab.to_device(moved[key], "cpu"))
            np.testing.assert_array_equal(back, value.numpy(), strict=True)
    # a queued one too, and on a stream each leaf goes on its own
    moved = ab.to_device(sd, "opencl:0", non_blocking=True)
    assert type(moved) is collections.OrderedDict
    np.testing.assert_array_equal(np.from_dlpack(moved["0.weight"].to("cpu")), sd["0.weight"].numpy())


@needs_torch
def test_copy_of_a_state_dict_into_another_writes_every_tensor():
    torch = pytest.importorskip("torch")
    sd = state_dict()
    sd2 = collections.OrderedDict((key, torch.zeros_like(value)) for key, value in sd.items())
    assert ab.copy(sd, sd2) is None
    for key in sd:
        assert torch.equal(sd2[key], sd[key]), key
    into = {key: np.zeros(tuple(value.shape), dtype=value.numpy().dtype) for key, value in sd.items()}
    ab.copy(sd, into)  # a dict and an OrderedDict are both mappings: their keys must match
    for key in sd:
        np.testing.assert_array_equal(into[key], sd[key].numpy())
    into["renamed"] = into.pop("1.running_var")
    with pytest.raises(ValueError, match="keys"):
        ab.copy(sd, into)


@needs_torch
def test_convert_memory_of_a_state_dict_keeps_its_type_and_values():
    sd = state_dict()
    converted = ab.convert.convert_memory(sd, "torch", "numpy", None)
    assert type(converted) is collections.OrderedDict and list(converted) == list(sd)
    for key, value in sd.items():
        assert isinstance(converted[key], np.ndarray)
        np.testing.assert_array_equal(converted[key], value.numpy(), strict=True)


Batch = collections.namedtuple("Batch", "images labels")


class Tagged(list):
    """A list subclass with an attribute."""
    tag = "kept"


def test_subclasses_of_mapping_list_and_tuple_are_structures_rebuilt_as_themselves():
    batch = Batch(np.arange(6.0).reshape(2, 3), np.array([1, 0], dtype=np.int8))
    moved = ab.to_device(batch, "opencl:0")
    assert type(moved) is Batch
    np.testing.assert_array_equal(np.from_dlpack(moved.labels.to("cpu")), batch.labels)
    tagged = Tagged([np.ones(3), np.zeros(2)])
    back = ab.to_device(tagged, "cpu", copy=True)
    assert type(back) is Tagged and len(back) == 2
    counts = collections.defaultdict(int, a=np.arange(3))
    moved = ab.to_device(counts, "cpu")
    assert type(moved) is collections.defaultdict and moved.default_factory is int
    np.testing.assert_array_equal(np.from_dlpack(moved["a"]), np.arange(3))
    # a Mapping that is no dict: rebuilt from its pairs
    proxy = ab.to_device(_FrozenMap(w=np.arange(4)), "cpu")
    assert type(proxy) is _FrozenMap
    np.testing.assert_array_equal(np.from_dlpack(proxy["w"]), np.arange(4))
    nested = ab.convert.convert_memory({"a": Batch(np.ones(2), [np.zeros(1)])}, "numpy", "numpy", None)
    assert type(nested["a"]) is Batch and type(nested["a"].labels) is list


class _StarBatch(tuple):
    """A tuple made from its items one by one: _StarBatch(a, b)."""

    def __new__(cls, *items):
        return super().__new__(cls, items)


class _StarLayers(list):
    def __init__(self, *items):
        super().__init__(items)


class _Summed(tuple):
    """A tuple subclass that makes something else of its items: comes back a plain tuple."""

    def __new__(cls, items=()):
        return super().__new__(cls, (sum(1 for _ in items),))


@pytest.mark.parametrize("how", ["to_device", "convert_memory"])
def test_a_sequence_subclass_comes_back_with_its_items_or_plain_never_as_another_structure(how):
    """The hunt of 2026-11-30: a subclass taking its items as *args was rebuilt as
    cls(items): one item, the list of results, where the source had two."""
    a, b = np.ones(2, np.float32), np.arange(3, dtype=np.int16)
    move = ((lambda s: ab.to_device(s, "cpu")) if how == "to_device"
            else (lambda s: ab.convert.convert_memory(s, "numpy", "numpy", None)))
    summed = tuple.__new__(_Summed, (a, b))  # its items, as pickle would make it
    for source, kind in ((_StarBatch(a, b), _StarBatch), (_StarLayers(a, b), _StarLayers), (summed, tuple)):
        moved = move(source)
        assert type(moved) is kind and len(moved) == 2, (type(moved), moved)
        np.testing.assert_array_equal(np.asarray(moved[0]), a)
        np.testing.assert_array_equal(np.asarray(moved[1]), b)
        assert np.asarray(moved[1]).dtype == np.int16


class _KeepsItsArgument(collections.abc.Mapping):
    """A mapping made from a dict, which it keeps as it is (made from pairs it breaks)."""

    def __init__(self, data):
        self._data = data

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)


def test_a_mapping_made_from_a_dict_comes_back_as_itself_whole():
    moved = ab.to_device(_KeepsItsArgument({"a": np.arange(3), "b": np.ones(2)}), "cpu")
    assert type(moved) is _KeepsItsArgument and sorted(moved) == ["a", "b"]
    np.testing.assert_array_equal(np.from_dlpack(moved["b"]), np.ones(2))


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed here")
def test_a_target_framework_that_is_not_installed_is_a_conversion_error():
    with pytest.raises(ab.MemoryConversionError, match="cupy"):
        ab.convert.convert_memory(np.ones(3), "numpy", "cupy", 0)


class _FrozenMap(_KeepsItsArgument):
    """A mapping made as dict() is, from pairs or keywords."""

    def __init__(self, *args, **kwargs):
        super().__init__(dict(*args, **kwargs))


# ------------------------------------------------------------------ a batch names the place that failed

BAD = {
    "strings": lambda: np.array(["a", "b"]),  # NumPy's own __dlpack__ refuses
    "byte-swapped": lambda: np.arange(3, dtype=">f8"),
    "consumed capsule": lambda: _consumed(),
}


def _consumed():
    capsule = np.arange(3.0).__dlpack__()
    ab.from_dlpack(capsule)
    return capsule


@pytest.mark.parametrize("bad", sorted(BAD))
def test_a_batch_failure_names_the_array_that_failed(bad):
    xs = [np.arange(4.0) for _ in range(800)]
    xs[777] = BAD[bad]()
    with pytest.raises(Exception, match=r"x\[777\]") as raised:
        ab.to_device(xs, "opencl:0")
    assert not isinstance(raised.value, MemoryError)
    dsts = [np.zeros(4) for _ in range(800)]
    with pytest.raises(Exception, match=r"src\[777\]"):
        ab.copy(xs, dsts)
    with pytest.raises(Exception, match=r"dst\[777\]"):
        ab.copy(dsts, [np.zeros(4) for _ in range(777)] + [BAD[bad]()] + [np.zeros(4) for _ in range(22)])
    # in a structure, by its place there
    nested = {"layers": [np.ones(2), {"w": BAD[bad](), "b": np.ones(1)}]}
    with pytest.raises(Exception, match=r"x\['layers'\]\[1\]\['w'\]"):
        ab.to_device(nested, "cpu", copy=True)
    with pytest.raises(Exception, match=r"dst\['layers'\]\[1\]\['w'\]"):
        ab.copy({"layers": [np.ones(2), {"w": np.ones(2), "b": np.ones(1)}]}, nested)


def test_on_a_stream_a_structure_goes_as_one_batch_and_a_failure_names_its_place():
    """A review of 2026-11-30: with stream= a structure moved leaf by leaf (to_device_many
    took no stream), so a state dict on a stream lost the batch's one block and one copy."""
    out = run_with_fake_cuda("""
        import numpy as np, pytest, arraybridge as ab
        nested = {"layers": [np.ones(2), {"w": np.array(["text"]), "b": np.ones(1)}]}
        with pytest.raises(BufferError, match=r"^arraybridge: x\\['layers'\\]\\[1\\]\\['w'\\] \\(a numpy.ndarray "
                                              r"of dtype <U4\\) cannot go through DLPack") as raised:
            ab.to_device(nested, "cuda:0", stream=2)
        assert "x[2]" not in str(raised.value), raised.value
        nested["layers"][1]["w"] = np.arange(3)
        with ab.recording() as record:
            moved = ab.to_device(nested, "cuda:0", stream=2)
        assert [r.call for r in record.records] == ["to_device_many"], record.records  # one batch
        np.testing.assert_array_equal(np.from_dlpack(moved["layers"][1]["w"].to("cpu")), np.arange(3))
        # Queued on the stream and waited for (no non_blocking): done when it returns.
        moved = ab.to_device_many([np.arange(1 << 16, dtype=np.float32)] * 3, "cuda:0", stream=2)
        assert all(t.is_ready() for t in moved)
        np.testing.assert_array_equal(np.from_dlpack(moved[2].to("cpu")), np.arange(1 << 16))
        queued = ab.to_device_many([np.arange(1 << 16, dtype=np.float32)] * 3, "cuda:0", stream=2,
                                   non_blocking=True)
        assert not queued[0].is_ready()
        np.testing.assert_array_equal(np.from_dlpack(queued[1].to("cpu")), np.arange(1 << 16))
        back = ab.to_device(moved, "cpu", stream=2)  # the stream on the sources' side
        np.testing.assert_array_equal(np.from_dlpack(back[0]), np.arange(1 << 16))
        with pytest.raises(ValueError, match="neither the destination nor the sources have DLPack streams"):
            ab.to_device_many([np.ones(2)], "cpu", stream=2)
        with pytest.raises(ValueError, match="the sources are on several devices"):
            ab.to_device_many([moved[0], np.ones(2)], "cpu", stream=2)
        del moved, queued, back
        print("ok")
    """, delay_us=20000)
    assert out.strip() == "ok"


def test_a_named_failure_keeps_its_class_and_status():
    xs = [np.arange(3.0), np.arange(3.0)]
    with pytest.raises(ab.CopyRequiredError, match=r"x\['b'\]") as raised:
        ab.to_device({"a": xs[0], "b": ab.to_device(xs[1], "opencl:0")}, "cpu", copy=False)
    assert raised.value.status_name == "ABR_ERR_COPY_REQUIRED"
    with pytest.raises(ab.MemoryConversionError, match=r"data\['b'\]\[0\]"):
        # To NumPy: the same failure in any target's words, and no framework to import
        # (JAX, imported here, cost the memcheck shard without JAX's modules minutes).
        ab.convert.convert_memory({"a": np.ones(2, dtype=np.float32), "b": [np.array(["text"])]}, "numpy", "numpy",
                                  None)


# ------------------------------------------------------------------ flipped images into torch

@needs_torch
@pytest.mark.parametrize("flip", ["rows", "channels", "both", "transposed"])
def test_a_flipped_image_into_torch_is_one_compact_copy_with_exact_values(flip, caplog):
    torch = pytest.importorskip("torch")
    img = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
    view = {"rows": img[::-1], "channels": img[..., ::-1], "both": img[::-1, :, ::-1],
            "transposed": img[::-1].transpose(2, 0, 1)}[flip]
    with caplog.at_level("DEBUG", logger="arraybridge"):
        got = ab.convert.convert_memory(view, "numpy", "torch", None)
    assert isinstance(got, torch.Tensor) and got.dtype == torch.uint8
    np.testing.assert_array_equal(got.numpy(), view, strict=True)
    assert not np.shares_memory(got.numpy(), img)  # a copy, the only one needed
    assert any("negative strides" in record.getMessage() for record in caplog.records), caplog.text
    with pytest.raises(ab.MemoryConversionError, match="negative strides"):
        ab.convert.convert_memory(view, "numpy", "torch", None, copy=False)
    # what torch can hold stays a view: a transpose or a step, and broadcasting
    plain = ab.convert.convert_memory(img.transpose(2, 0, 1)[:, ::2], "numpy", "torch", None, copy=False)
    assert np.shares_memory(plain.numpy(), img)
    # the same in a structure, and on to_device with contiguous="nonnegative"
    both = ab.convert.convert_memory({"image": view, "same": img}, "numpy", "torch", None)
    np.testing.assert_array_equal(both["image"].numpy(), view)
    t = ab.to_device(view, "cpu", contiguous="nonnegative")
    assert t.report.path == "host_copy" and "negative strides" in t.report.detail, t.report
    assert all(s >= 0 for s in t.strides)
    np.testing.assert_array_equal(torch.from_dlpack(t).numpy(), view)
    with pytest.raises(ab.CopyRequiredError, match='negative strides.*contiguous="nonnegative"'):
        ab.to_device(view, "cpu", copy=False, contiguous="nonnegative")
    batch = ab.to_device([view, img], "cpu", contiguous="nonnegative")
    assert all(s >= 0 for s in batch[0].strides) and np.shares_memory(np.from_dlpack(batch[1]), img)
    np.testing.assert_array_equal(torch.from_dlpack(batch[0]).numpy(), view)


def test_contiguous_takes_true_false_or_nonnegative_only():
    with pytest.raises(ValueError, match="nonnegative"):
        ab.to_device(np.ones(3), "cpu", contiguous="compact")


def test_copy_false_refuses_what_a_target_must_copy_naming_why():
    frozen = np.arange(3.0)
    frozen.flags.writeable = False
    if HAVE_TORCH:
        with pytest.raises(ab.MemoryConversionError, match="read-only.*copy=False"):
            ab.convert.convert_memory(frozen, "numpy", "torch", None, copy=False)
    # Of bytes, which nobody may write: what is refused is a layout JAX cannot hold (and no JAX
    # import here: under memcheck it costs a minute in the shard without JAX's modules).
    stepped = np.frombuffer(np.arange(4, dtype=np.float32).tobytes(), np.float32)[::2]
    with pytest.raises(ab.MemoryConversionError, match="copy=False.*contiguous=True, source strided"):
        ab.convert.convert_memory(stepped, "numpy", "jax", None, copy=False)
    got = ab.convert.convert_memory(np.arange(4.0), "numpy", "numpy", None, copy=True)
    assert got.flags.writeable and not np.shares_memory(got, frozen)


# ------------------------------------------------------------------ JAX arrays never change

@pytest.mark.slow  # JAX and torch in one module: under memcheck, JAX's import belongs to a shard of its own
@pytest.mark.parametrize("source", ["numpy", "a read-only view", "torch", "a read-only view of torch's",
                                    "a read-only view of a bytearray", "read-only memory of its own"])
def test_memory_its_source_may_still_write_reaches_jax_as_a_copy_so_a_jax_array_never_changes(source):
    """Snapshots of weights a training loop updates in place: each JAX array keeps the
    values it was made with (as jnp.asarray's copy does), so jit, which compiles a
    closed-over array in as a constant, and eager code agree. copy=False is refused.
    A read-only view is no proof: what it views may still be written."""
    jax = pytest.importorskip("jax")
    if "torch" in source and not HAVE_TORCH:
        pytest.skip("torch is installed by `make test`; run it through make")
    weights = np.arange(1024, dtype=np.float32)
    kind, given = "numpy", weights
    if source == "a read-only view":
        given = weights.view()
    elif "torch" in source:
        kind, given = "torch", importlib.import_module("torch").from_numpy(weights)
        if source == "a read-only view of torch's":
            kind, given = "numpy", given.numpy()  # a view of the tensor's memory (its base is the tensor)
    elif source == "a read-only view of a bytearray":
        memory = bytearray(weights.tobytes())
        weights = np.frombuffer(memory, np.float32)  # written through below
        given = np.frombuffer(memoryview(memory).toreadonly(), np.float32)
    if given is not weights and kind == "numpy":
        given.flags.writeable = False  # read-only to us, still written through `weights`
    snapshots = []
    for _ in range(3):
        if source == "read-only memory of its own":
            weights.flags.writeable = False  # NumPy lets its owner set it back
        snapshots.append(ab.convert.convert_memory(given, kind, "jax", None))
        weights.flags.writeable = True
        weights += 1  # the optimizer's in-place step
    for step, snapshot in enumerate(snapshots):
        np.testing.assert_array_equal(np.asarray(snapshot), np.arange(1024, dtype=np.float32) + step)
        assert float(jax.jit(lambda: snapshot.sum())()) == float(snapshot.sum())
    weights.flags.writeable = source != "read-only memory of its own"
    with pytest.raises(ab.MemoryConversionError, match="immutable.*still be written.*copy=False forbids"):
        ab.convert.convert_memory(given, kind, "jax", None, copy=False)


@pytest.mark.slow  # as above
def test_memory_nobody_may_write_still_reaches_jax_without_a_copy():
    jax = pytest.importorskip("jax")
    # On the CPU, where gpu_id=None asks for the result: JAX's default device on a GPU
    # machine is the GPU, whose memory no copy=False can bring to the CPU (the H200 run).
    owned = jax.device_put(jax.numpy.arange(1024.0), jax.devices("cpu")[0])
    for given, kind in [(owned, "jax"), (np.asarray(owned), "numpy")]:  # NumPy's read-only view of JAX's memory
        got = ab.convert.convert_memory(given, kind, "jax", None, copy=False)
        assert got.unsafe_buffer_pointer() == owned.unsafe_buffer_pointer()


# ------------------------------------------------------------------ autograd sees our writes

@needs_torch
@pytest.mark.parametrize("how", ["copy", "copy into a view", "structure", "copy_many", "non_blocking"])
def test_a_write_into_a_tensor_autograd_saved_makes_backward_raise(how):
    torch = pytest.importorskip("torch")
    a = torch.ones(3, requires_grad=True)
    b = torch.ones(3)
    y = (a * b).sum()  # keeps b for the backward pass
    before = b._version
    src = np.full(3, 5.0, dtype=np.float32)
    if how == "copy":
        ab.copy(src, b)
    elif how == "copy into a view":
        ab.copy(src[:2], b[:2])  # a view shares b's version counter
    elif how == "structure":
        ab.copy({"b": src}, {"b": b})
    elif how == "copy_many":
        ab.copy([src, src], [torch.zeros(3), b])
    else:
        done = ab.copy(src, b, non_blocking=True)
        if done is not None:
            done.wait()
    assert b._version > before
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


@needs_torch
@pytest.mark.parametrize("how", ["cast refused", "shape refused", "structure cast refused", "copy_many later pair",
                                 "copy_many bad source", "a Tensor's twin", "bad source", "non_blocking refused",
                                 "no conversion", "copy_many no conversion", "shared host bytes"])
def test_a_copy_refused_before_anything_moves_leaves_the_version_and_backward_alone(how):
    """A refused copy bumped its torch destination's version all the same (the bump came
    at import), so a backward pass that had saved the untouched tensor then raised
    torch's "modified by an inplace operation" for a write that never happened. The
    hunt of 2026-11-30 found it again for ABR_ERR_UNSUPPORTED (no conversion from
    float8, a copy between host memory and a device's view of it), which the planner
    returns before anything moves, as the header now promises."""
    torch = pytest.importorskip("torch")
    a = torch.ones(3, requires_grad=True)
    raw = np.zeros(3 * 4 + 4096, np.uint8)  # b starts at a page: opencl:0 uses it in place
    start = (-raw.ctypes.data) % 4096
    ones = raw[start:start + 3 * 4].view(np.float32)
    ones[:] = 1
    b = torch.from_numpy(ones)
    y = (a * b).sum()  # keeps b for the backward pass
    target = ab.to_device(b, "cpu") if how == "a Tensor's twin" else b  # a Tensor viewing b writes into b
    src = np.full(3, 5.0, dtype=np.float32)
    if how == "shared host bytes":
        on_device = ab.to_device(b, "opencl:0")
        assert on_device.report.path == "host_wrap", on_device.report  # PoCL uses b's bytes in place
    with pytest.raises((ab.ArrayBridgeError, TypeError, ValueError)) as refused:
        if how in ("cast refused", "a Tensor's twin"):
            ab.copy(src.astype(np.complex64), target)  # complex into float: same_kind refuses
        elif how == "shape refused":
            ab.copy(np.ones(4, np.float32), target)
        elif how == "structure cast refused":
            ab.copy({"a": src, "b": src.astype(np.complex64)}, {"a": torch.zeros(3), "b": target})
        elif how == "copy_many later pair":
            ab.copy_many([src, np.ones(4, np.float32)], [target, torch.zeros(3)])
        elif how == "copy_many bad source":
            ab.copy_many([src, object()], [target, torch.zeros(3)])
        elif how == "non_blocking refused":
            ab.copy(src.astype(np.complex64), target, non_blocking=True)
        elif how == "no conversion":
            ab.copy(torch.ones(3, dtype=torch.float8_e4m3fn), target)
        elif how == "copy_many no conversion":
            ab.copy_many([src, torch.ones(3, dtype=torch.float8_e4m3fn)], [target, torch.zeros(3)])
        elif how == "shared host bytes":
            ab.copy(on_device, target)
        else:
            ab.copy(object(), target)
    if how in ("no conversion", "copy_many no conversion", "shared host bytes"):  # the planner's refusals
        assert getattr(refused.value, "status_name", None) == "ABR_ERR_UNSUPPORTED", refused.value
    assert b._version == 0 and torch.equal(b, torch.ones(3))
    y.backward()
    assert torch.equal(a.grad, torch.ones(3))


@needs_torch
def test_convert_memory_from_torch_to_torch_on_its_device_is_the_tensor_itself():
    """The frameworks hunt of 2026-11-30: convert_memory(x, "torch", "torch", None) made a
    new tensor over x's memory, with a version counter of its own: y.mul_(0) zeroed x
    behind autograd's back and backward gave w.grad = 0 where it is x, with no error.
    The tensor itself comes back, as torch.as_tensor(x) gives it, in a structure too."""
    torch = pytest.importorskip("torch")
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = torch.tensor([10.0, 20.0, 30.0])
    loss = (w * x).sum()  # saves x: d loss / d w is x
    y = ab.convert.convert_memory(x, "torch", "torch", None)
    assert y is x
    y.mul_(0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    state = {"a": torch.ones(3), "b": torch.zeros(2, 2).t()}  # a strided one too
    moved = ab.convert.convert_memory(state, "torch", "torch", None)
    assert moved["a"] is state["a"] and moved["b"] is state["b"]
    copied = ab.convert.convert_memory(x, "torch", "torch", None, copy=True)  # asked for: a tensor of its own
    assert copied is not x and copied.data_ptr() != x.data_ptr()
    leaf = torch.ones(3, requires_grad=True)  # read-only to us: a copy that does not require grad
    assert ab.convert.convert_memory(leaf, "torch", "torch", None) is not leaf
    assert ab.convert.convert_memory(x, "torch", "torch", None, dtype="float64").dtype == torch.float64


@needs_torch
@pytest.mark.parametrize("how", ["to_device cpu", "from_dlpack", "a Tensor of the Tensor", "to_device_many",
                                 "state dict", "opencl host wrap", "copy_many"])
def test_a_write_into_a_tensor_viewing_a_torch_tensor_makes_backward_raise(how):
    """A newcomer's trial: t = to_device(x.detach(), "cpu") views x's memory, and a write
    into t changed x behind autograd's back (x.grad from the new values, no error). A
    Tensor that views a torch tensor writable now bumps its version on each write."""
    torch = pytest.importorskip("torch")
    for _ in range(8):  # a host wrap needs x's data aligned for opencl:0: tried until one is
        x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = (x * x).sum()  # keeps x for the backward pass
        d = x.detach()  # shares x's memory and version counter
        if how == "to_device cpu":
            t = ab.to_device(d, "cpu")
        elif how == "from_dlpack":
            t = ab.from_dlpack(d)
        elif how == "a Tensor of the Tensor":
            t = ab.to_device(ab.to_device(d, "cpu"), "cpu")
        elif how in ("to_device_many", "copy_many"):
            t = ab.to_device([torch.zeros(2), d], "cpu")[1]
        elif how == "state dict":
            t = ab.to_device(collections.OrderedDict(w=d), "cpu")["w"]
        else:
            t = ab.to_device(d, "opencl:0")
            if t.report.path != "host_wrap":
                continue
        assert np.shares_memory(np.from_dlpack(t.to("cpu")), d.numpy()) or how == "opencl host wrap"
        before = x._version
        if how == "copy_many":
            ab.copy([np.zeros(2, np.float32), np.full(t.shape, 10, np.float32)], [np.zeros(2, np.float32), t])
        else:
            ab.copy(np.full(t.shape, 10, np.float32), t)
        assert x._version > before and float(d[-1]) == 10.0
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward()
        return
    pytest.fail("opencl:0 never wrapped x's memory in 8 tries")


@needs_torch
def test_a_batch_says_which_results_view_their_sources_and_only_those_bump_a_version():
    """Each batch result's path comes from the library (abr_batch_report version 2):
    before, a batch that made a view took every other device's result of host memory
    for one, and a write into a copy bumped its torch source's version for nothing."""
    torch = pytest.importorskip("torch")

    def at(offset):  # a leaf whose data starts `offset` bytes past a page: opencl:0 wraps it only aligned
        raw = np.zeros(6 * 4 + 8192, np.uint8)
        start = (-raw.ctypes.data) % 4096 + offset
        return torch.from_numpy(raw[start:start + 6 * 4].view(np.float32)).requires_grad_()

    wrapped, copied = at(0), at(4)
    results = ab.to_device([wrapped.detach(), copied.detach()], "opencl:0")
    assert [t.report.path for t in results] == ["host_wrap", "host_to_device"]
    assert [t.report.path for t in ab.to_device([np.zeros(2), copied.detach()], "cpu")] == ["zero_copy"] * 2
    for result in results:
        ab.copy(np.full(6, 10, np.float32), result)
    assert (wrapped._version, copied._version) == (1, 0)
    assert float(wrapped.detach()[0]) == 10.0 and float(copied.detach()[0]) == 0.0


@needs_torch
def test_a_write_into_the_read_only_view_of_a_tensor_that_requires_grad_says_why():
    """A newcomer's trial: the refusal listed JAX, TensorFlow, legacy capsules and NumPy,
    but not the reason this Tensor is read-only."""
    torch = pytest.importorskip("torch")
    x = torch.ones(3, requires_grad=True)
    t = ab.to_device(x, "cpu")
    assert t.read_only
    with pytest.raises(ab.DLPackError, match=r"torch tensor that requires grad is autograd's \(view its .detach"):
        ab.copy(np.zeros(3, np.float32), t)
    with pytest.raises(ab.DLPackError, match=r"dst\[1\] is marked READ_ONLY; .*a torch tensor that requires grad is autograd's \(view its .detach"):
        ab.copy_many([np.zeros(3, np.float32)] * 2, [np.zeros(3, np.float32), t])
    assert torch.equal(x.detach(), torch.ones(3))


@needs_torch
def test_a_tensor_copied_from_a_torch_tensor_leaves_its_version_alone():
    torch = pytest.importorskip("torch")
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = (x * x).sum()
    for t in (ab.to_device(x.detach(), "cpu", copy=True), ab.to_device(x.detach(), "cpu", dtype="float64"),
              ab.to_device([x.detach()], "cpu", copy=True)[0], ab.to_device(x.detach()[::2], "cpu", contiguous=True)):
        ab.copy(np.full(t.shape, 10, t.dtype), t)
    assert x._version == 0
    y.backward()
    assert torch.equal(x.grad, torch.tensor([2.0, 4.0, 6.0]))


@needs_torch
def test_a_copy_into_a_tensor_nothing_saved_still_leaves_autograd_working():
    torch = pytest.importorskip("torch")
    b = torch.zeros(3)
    ab.copy(np.arange(3, dtype=np.float32), b)
    a = torch.ones(3, requires_grad=True)
    (a * b).sum().backward()  # b written before autograd saved it: nothing stale
    assert torch.equal(a.grad, torch.arange(3, dtype=torch.float32))


@needs_torch
@pytest.mark.parametrize("how", ["copy", "a Tensor viewing it", "structure", "copy_many"])
def test_a_write_into_an_inference_tensor_is_refused_outside_inference_mode_as_torch_refuses_it(how):
    """A newcomer's trial: ab.copy(src, c) wrote a tensor made under torch.inference_mode()
    outside it, where torch's own c.copy_(src) raises ("Inplace update to inference
    tensor outside InferenceMode is not allowed"). Inside inference mode both write."""
    torch = pytest.importorskip("torch")
    with torch.inference_mode():
        c, other = torch.zeros(3), torch.zeros(3)
    src = np.ones(3, dtype=np.float32)

    def write():
        if how == "copy":
            ab.copy(src, c)
        elif how == "a Tensor viewing it":
            ab.copy(src, ab.to_device(c, "cpu"))
        elif how == "structure":
            ab.copy({"c": src}, {"c": c})
        else:
            ab.copy([src, src], [np.zeros(3, np.float32), c])

    with pytest.raises(RuntimeError, match="Inplace update to inference tensor"):
        other.copy_(torch.ones(3))  # torch's own rule, which ours follows
    with pytest.raises(ab.DLPackError, match=r"made under torch.inference_mode\(\), which torch refuses to update"):
        write()
    assert torch.equal(c, torch.zeros(3))  # refused before anything was written
    with torch.inference_mode():
        write()
    assert torch.equal(c, torch.ones(3))


def test_a_batch_of_small_reads_on_a_stream_comes_back_256_byte_aligned():
    """As to_device of each would (the GUIDE's promise), whatever the sources' offsets:
    here views 4, 236, 212 ... bytes past 256-byte boundaries of one allocation."""
    out = run_with_fake_cuda(f"""
        import sys, numpy as np, arraybridge as ab
        sys.path.insert(0, {str(pathlib.Path(__file__).parent)!r})  # the wheel's run is outside the tree
        from handmade_dlpack import Handmade, CUDA
        base = ab.to_device(np.arange(64 * 1024, dtype=np.int32), "cuda:0")
        views = [Handmade(data=base.data_ptr, device=(CUDA, 0), dtype=(0, 32, 1), shape=(100,), byte_offset=offset)
                 for offset in range(4, 40000, 500)]
        moved = ab.to_device([view.capsule() for view in views], "cpu", non_blocking=True)
        for t, view in zip(moved, views):
            t.wait()
            assert t.data_ptr % 256 == 0, (t.data_ptr % 256, t.report.detail)
            first = view.managed.dl_tensor.byte_offset // 4
            np.testing.assert_array_equal(np.from_dlpack(t), np.arange(first, first + 100, dtype=np.int32))
        print("ok", moved[0].report.detail)
    """)
    assert out.startswith("ok"), out


# ------------------------------------------------------------------ a forked worker (a DataLoader's)

FORKED = """
import faulthandler, gc, multiprocessing, os, sys
import numpy as np
import arraybridge as ab
device = sys.argv[1]
released = ab.to_device(np.arange(1 << 16, dtype=np.float32), device)
del released  # a release queued in the parent (CUDA: its reclaimer's thread, which the child lacks)
kept = ab.to_device(np.arange(6, dtype=np.float32), device)  # the parent opened the device's driver
pending = ab.to_device(np.arange(1 << 22, dtype=np.float32), device, non_blocking=True)  # the parent's queued work

def child(answers):
    global kept, pending
    faulthandler.dump_traceback_later(30, exit=True)  # a hang ends, and says where
    try:
        ab.to_device(np.ones(4, np.float32), device)
        answers.put("device work ran")
    except ab.ArrayBridgeError as error:
        answers.put(str(error))
    host = np.zeros(4)
    ab.copy(np.arange(4.0), host)  # host memory still works
    answers.put(host.tolist())
    answers.put([d.name for d in ab.devices()])
    for ask in (pending.wait, pending.is_ready):  # the parent's work: nothing here can wait for it
        try:
            answers.put(f"{ask.__name__}() returned {ask()}")
        except ab.ArrayBridgeError as error:
            answers.put(str(error))
    del kept, pending  # inherited device tensors go without a hang, and without a word
    gc.collect()
    answers.put("done")

answers = multiprocessing.get_context("fork").Queue()
worker = multiprocessing.get_context("fork").Process(target=child, args=(answers,))
worker.start()
worker.join(60)
print(repr([answers.get(timeout=5) for _ in range(6)] if worker.exitcode == 0 else worker.exitcode))
np.testing.assert_array_equal(np.from_dlpack(kept.to("cpu")), np.arange(6))  # the parent's device still works
queued = ab.to_device(np.arange(1 << 22, dtype=np.float32), device, non_blocking=True)
pid = os.fork()  # a plain fork whose child exits normally: atexit's pool_trim, after trimming and deleting
if pid == 0:
    faulthandler.dump_traceback_later(30, exit=True)
    del kept
    gc.collect()
    ab.pool_trim()
    sys.exit(0)  # `queued` is still the parent's work: it goes at exit, unwaited
pending.wait(), queued.wait()  # the parent's own waits still work
np.testing.assert_array_equal(np.from_dlpack(pending.to("cpu")), np.arange(1 << 22, dtype=np.float32))
assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0, "the forked child hung or failed at its exit"
print("parent ok")
"""


@pytest.mark.parametrize("device", ["opencl:0", "cuda:0"])
def test_a_forked_child_is_refused_device_work_by_name_instead_of_hanging(device):
    """A newcomer's trial: a multiprocessing worker forked after the parent's first call
    (a DataLoader's, Linux's default) hung for ever on its first OpenCL transfer: PoCL's
    threads stayed in the parent. Device work in the child is now refused, naming the fork."""
    import subprocess
    import sys
    from test_cuda_fake import FAKE
    env = dict(__import__("os").environ)
    if device == "cuda:0":
        if not FAKE.exists():
            pytest.skip(f"the fake CUDA driver is not built ({FAKE}): run make test")
        env.update(ARRAYBRIDGE_CUDA_LIBRARY=str(FAKE), ARRAYBRIDGE_DISABLE_OPENCL="1")
    done = subprocess.run([sys.executable, "-c", FORKED, device], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and "parent ok" in done.stdout, done.stdout + done.stderr
    answers = eval(done.stdout.splitlines()[0])
    assert isinstance(answers, list), f"the forked child hung or failed: exit code {answers}; {done.stderr}"
    refusal, host, names, waited, asked, finished = answers
    kind = device.split(":")[0]
    assert f"to_device({device}): the driver of {kind} memory was opened in process " in refusal, refusal
    assert "which forked this one" in refusal and 'multiprocessing\'s "spawn"' in refusal, refusal
    assert host == [0.0, 1.0, 2.0, 3.0] and device in names and finished == "done", done.stdout
    for said in (waited, asked):  # the wait hung on PoCL when the parent's work was still queued at the fork
        assert "cannot wait here for queued work: this event was made before this process" in said, said
    assert "Exception ignored" not in done.stderr, done.stderr  # an inherited tensor goes without a word


# ------------------------------------------------------------------ np.asarray of a Tensor

def test_np_asarray_of_a_tensor_numpy_cannot_view_raises_instead_of_an_object_array():
    """A newcomer's trial: np.asarray of an OpenCL (or bfloat16) Tensor gave a 0-d object
    array holding the Tensor, so a 6-element array silently became one object."""
    on_device = ab.to_device(np.arange(6, dtype=np.float32), "opencl:0")
    with pytest.raises(TypeError, match=r"this tensor is on opencl:0: move it first, np.asarray\(t.to\('cpu'\)\)"):
        np.asarray(on_device)
    with pytest.raises(TypeError, match="on opencl:0"):
        np.array(on_device, dtype=np.float64)
    np.testing.assert_array_equal(np.asarray(on_device.to("cpu")), np.arange(6))
    if HAVE_TORCH:
        import torch
        halves = ab.to_device(torch.tensor([1.5, 2.5], dtype=torch.bfloat16), "cpu")
        with pytest.raises(TypeError, match="NumPy has no bfloat16 arrays: convert it first"):
            np.asarray(halves)
        assert np.asarray(halves.to("cpu", dtype="float32")).tolist() == [1.5, 2.5]
        # No cast reaches float8: the hint offered one anyway, and doing as it said raised.
        eights = ab.to_device(torch.tensor([1.5, -2.0]).to(torch.float8_e4m3fn), "cpu")
        with pytest.raises(TypeError) as refused:
            np.asarray(eights)
        assert str(refused.value) == ("arraybridge: NumPy has no float8_e4m3fn arrays: hand it to a framework that "
                                      "has float8_e4m3fn (torch.from_dlpack(t))")
        assert torch.from_dlpack(eights).float().tolist() == [1.5, -2.0]
    frozen = np.arange(4.0)
    frozen.flags.writeable = False
    host = ab.to_device(frozen, "cpu")
    viewed = np.asarray(host)
    assert np.shares_memory(viewed, frozen) and not viewed.flags.writeable  # a view, read-only as its source
    assert host.__array__(dtype=np.float32).dtype == np.float32 and host.__array__(copy=True).flags.writeable
    with pytest.raises(ValueError, match="needs a copy, which copy=False forbids"):
        host.__array__(dtype=np.float32, copy=False)


def test_a_copy_into_interleaved_strides_whose_elements_are_apart_writes_as_np_copyto():
    """The hunt of 2026-11-30: as_strided(b, (3, 2), (8, 12)) gives six float32 elements
    places of their own, interleaved (0, 3, 2, 5, 4, 7); the quick stride rule refused it,
    saying two elements shared memory. Strides [1, 1] do alias, and stay refused."""
    strided = np.lib.stride_tricks.as_strided
    values = np.arange(1, 7, dtype=np.float32).reshape(3, 2)
    ours, numpy_s = np.zeros(8, np.float32), np.zeros(8, np.float32)
    ab.copy(values, strided(ours, (3, 2), (8, 12), writeable=True))
    np.copyto(strided(numpy_s, (3, 2), (8, 12), writeable=True), values)
    assert ours.tolist() == numpy_s.tolist() == [1, 0, 3, 2, 5, 4, 0, 6]
    with pytest.raises(ab.DLPackError, match=r"strides \[1, 1\] over shape \[3, 2\] give two elements the same"):
        ab.copy(values, strided(np.zeros(4, np.float32), (3, 2), (4, 4), writeable=True))


@needs_torch
def test_torch_objects_that_are_no_tensors_are_refused_as_any_non_array():
    """A newcomer's trial: a Module, dtype, device or Generator was taken for a tensor
    (its class is torch's) and failed inside the vetting with an AttributeError ('is_conj')."""
    import torch
    model = torch.nn.Linear(2, 2)
    with pytest.raises(TypeError, match=r"x \(a Linear\) is neither a DLPack capsule .*, or this one's "
                                        r"\.state_dict\(\) \(a structure of tensors\)"):
        ab.to_device(model, "cpu")
    for thing in (torch.float32, torch.device("cpu"), torch.Generator(), torch.finfo(torch.float32),
                  torch.nn.ParameterList([torch.nn.Parameter(torch.ones(2))])):
        for call in (lambda: ab.to_device(thing, "cpu"), lambda: ab.from_dlpack(thing),
                     lambda: ab.copy(np.ones(2, np.float32), thing)):
            with pytest.raises(TypeError, match=r"is neither a DLPack capsule nor an object with __dlpack__"):
                call()
    class Optimizer:  # an optimizer's shape (torch.optim's import costs two minutes under valgrind)
        def state_dict(self):
            return {"param_groups": [{"lr": 0.1}]}  # numbers: no hint to pass it
    with pytest.raises(TypeError, match=r"\(a Optimizer\) is neither .* or a DLPack capsule$"):
        ab.to_device(Optimizer(), "cpu")
    moved = ab.to_device(model.state_dict(), "cpu")  # what the message says works
    assert torch.equal(torch.from_dlpack(moved["weight"]), model.weight.detach())
    parameter = torch.nn.Parameter(torch.ones(2))  # a Tensor subclass: still vetted as torch's (autograd's)
    assert ab.to_device(parameter, "cpu").read_only


# ------------------------------------------------------------------ what DLPack cannot say

def test_a_masked_array_is_refused_instead_of_its_masked_elements_passing_as_numbers():
    """NumPy's __dlpack__ of a masked array exports its data and drops the mask, so its
    masked elements came through as numbers (JAX refuses it, as now we do)."""
    masked = np.ma.array([1.0, -999.0, 3.0], mask=[0, 1, 0])
    for call in (lambda: ab.to_device(masked, "cpu"), lambda: ab.to_device(masked, "opencl:0"),
                 lambda: ab.copy(np.ones(3), masked), lambda: ab.from_dlpack(masked)):
        with pytest.raises(ab.DLPackError, match=r"masked array's mask has no place in DLPack.*x.filled\(value\)"):
            call()
    with pytest.raises(ab.MemoryConversionError, match="masked array"):
        ab.convert.convert_memory(masked, "numpy", "numpy", None)
    np.testing.assert_array_equal(masked.data, [1.0, -999.0, 3.0])  # nothing written
    np.testing.assert_array_equal(np.from_dlpack(ab.to_device(masked.filled(0.0), "cpu")), [1.0, 0.0, 3.0])


@pytest.mark.parametrize("dtype", [">f4", np.dtype(">i2"), "<u8" if np.little_endian else ">u8"])
def test_a_dtype_of_the_other_byte_order_is_refused_not_made_native(dtype):
    """dtype=">f4" quietly gave native float32: a big-endian file format's reader got
    bytes in the wrong order."""
    native = np.dtype(dtype).isnative
    if native:  # this machine's order, spelled out: taken
        assert ab.to_device(np.ones(2), "cpu", dtype=dtype).dtype == np.dtype(dtype).name
        return
    with pytest.raises(ValueError, match=r"-endian, and DLPack holds data in this machine's byte order only"):
        ab.to_device(np.ones(2), "cpu", dtype=dtype)


@needs_torch
@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_a_numpy_array_of_ml_dtypes_bfloat16_or_float8_goes_through_with_its_dtype(name):
    """np.asarray of a JAX bfloat16 array is NumPy's array of ml_dtypes' bfloat16, which
    NumPy cannot export through DLPack: it was refused (the ecosystem hunt of 11-30),
    though DLPack and torch have the type. Its bytes go as they are, read-only kept."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    torch = pytest.importorskip("torch")
    values = np.array([[1.5, -2.0, 0.25], [448.0 if name == "float8_e4m3fn" else 3.0, -0.0, 0.125]])
    x = values.astype(getattr(ml_dtypes, name))
    t = ab.to_device(x, "cpu")
    assert t.dtype == name and t.report.path == "zero_copy"
    for got in (ab.convert.convert_memory(x, "numpy", "torch", None),
                torch.from_dlpack(ab.to_device(ab.to_device(x, "opencl:0"), "cpu")),
                torch.from_dlpack(ab.to_device(x[:, ::-2], "cpu", contiguous=True))):
        assert got.dtype == getattr(torch, name)
        expected = x if got.shape == x.shape else x[:, ::-2]
        assert got.view(torch.uint8).numpy().tobytes() == np.ascontiguousarray(expected).view(np.uint8).tobytes()
    x.setflags(write=False)
    assert ab.to_device(x, "cpu").read_only
    with pytest.raises(ab.DLPackError, match="READ_ONLY"):
        ab.copy(np.zeros(x.shape, np.float32), x)
    out = np.zeros(x.shape, getattr(ml_dtypes, name))
    ab.copy(torch.from_numpy(x.view(np.uint8 if x.itemsize == 1 else np.uint16).copy()).view(getattr(torch, name)), out)
    assert out.tobytes() == x.tobytes()  # a destination of the type too
    if x.itemsize > 1:  # the other byte order is refused, as NumPy's own export refuses it (the review)
        swapped = x.astype(x.dtype.newbyteorder(">" if np.little_endian else "<"))
        with pytest.raises(ab.DLPackError, match=r"newbyteorder\('='\)"):
            ab.to_device(swapped, "cpu")


def test_ml_dtypes_types_a_byte_holds_one_of_are_refused_with_a_hint():
    """ml_dtypes keeps int4 and float4_e2m1fn one element a byte; DLPack's are 4 bits."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    for name, hint in [("int4", r"x.astype\('int8'\)"), ("float4_e2m1fn", r"x.astype\('float32'\)")]:
        with pytest.raises(ab.DLPackError, match=hint):
            ab.to_device(np.ones(3, getattr(ml_dtypes, name)), "cpu")


@pytest.mark.parametrize("dtype", [np.longdouble, np.clongdouble, np.dtype("g"), "longdouble"])
def test_numpys_long_double_as_dtype_is_refused_by_name(dtype):
    """dtype=np.longdouble was "target dtype: dtype float cannot have bits = 128", a
    DLPackError pointing at IEEE's 128-bit float, which long double is not (the
    ecosystem hunt)."""
    if np.dtype(dtype).itemsize <= (8 if np.dtype(dtype).kind == "f" else 16):
        pytest.skip("long double is double on this machine")
    with pytest.raises(ValueError, match=r"is NumPy's long double \((float|complex)\d+, .*ask for (float64|complex128)"):
        ab.to_device(np.arange(3.0), "cpu", dtype=dtype)
