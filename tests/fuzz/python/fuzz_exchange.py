"""Fuzz target: the DLPack C exchange API a producer's type publishes
(__dlpack_c_exchange_api__), as to_device, from_dlpack and copy take it: fuzzed
table versions and prev_api chains (a cycle included), NULL functions, callbacks
that fail, raise, hand out NULL or a tensor with fuzzed fields, and current-stream
queries that fail. Invariants: only documented exceptions; the tensor a callback
hands out with success is deleted exactly once (never with an exception set), one
handed out with a failure never by the package. Run by run.sh."""
import ctypes
import sys

import atheris

with atheris.instrument_imports(include=["harness", "arraybridge"]):
    import harness
    from harness import ab, hd, np

unraisable = []
sys.unraisablehook = unraisable.append  # an exception raised in a ctypes callback: expected, kept quiet


def draw_table(fdp, from_py_object, current_work_stream):
    """(the table a type publishes, whether a usable one is reachable, what keeps it alive)."""
    version = (harness.small_or(fdp, [1], [0, 2, 2**32 - 1]), harness.small_or(fdp, [3], [0, 1, 4, 2**32 - 1]))
    functions = dict(from_py_object=from_py_object if harness.small_or(fdp, [True], [False]) else None,
                     current_work_stream=current_work_stream if harness.small_or(fdp, [True], [False]) else None)
    chain = harness.small_or(fdp, ["none"], ["behind", "cycle", "behind a newer major"])
    usable = version[0] == 1 and all(functions.values())  # a consumer needs both functions
    if chain == "none":
        return hd.exchange_table(version, **functions), usable, None
    if chain == "cycle":  # a header whose prev_api leads back to itself: a walk must end
        table = hd.exchange_table((2, 0), **functions)
        table.header.prev_api = ctypes.cast(ctypes.pointer(table.header), ctypes.POINTER(hd.DLPackExchangeAPIHeader))
        return table, False, None
    older = hd.exchange_table(version, **functions)
    newer = hd.exchange_table((2 if chain == "behind" else 2**32 - 1, 0), prev_api=older)
    return newer, usable, older


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    device = (harness.small_or(fdp, [hd.CPU, hd.CUDA], [hd.CUDA_HOST, hd.OPENCL, 99]), harness.small_or(fdp, [0], [1, -1]))
    source = harness.Source(fdp, versioned=True, device=device)
    export = harness.small_or(fdp, ["tensor"], ["fail", "fail with a tensor", "null", "raise"])
    code = harness.small_or(fdp, [-1], [1, 2**31 - 1, -2**31])
    stream_answer = harness.small_or(fdp, ["stream"], ["fail", "raise"])
    stream = harness.small_or(fdp, [0, 1, 7], [2**64 - 1])
    handed = []  # (tensor address) for each success and each "fail with a tensor"
    calls = {"export": 0, "stream": 0}

    def from_py_object(obj, out):
        calls["export"] += 1
        if export == "raise":
            raise harness.ProducerError("the producer raises in its callback")
        if export in ("tensor", "fail with a tensor"):
            out[0] = source.tensor.address
            handed.append(export)
        return 0 if export in ("tensor", "null") else code

    def current_work_stream(device_type, device_id, out):
        calls["stream"] += 1
        if stream_answer == "raise":
            raise harness.ProducerError("the producer raises in its callback")
        out[0] = stream
        return 0 if stream_answer == "stream" else code

    table, usable, keep = draw_table(fdp, hd.FROM_PY_OBJECT(from_py_object),
                                     hd.CURRENT_WORK_STREAM(current_work_stream))
    fallback = harness.small_or(fdp, ["none"], ["capsule", "raise"])
    spare = hd.Handmade(data=None, ndim=0, shape=[0])

    def dlpack(self, **keywords):
        if fallback == "raise":
            raise harness.ProducerError("the producer's __dlpack__ refuses")
        return spare.capsule()

    framework = hd.framework_type(table, dlpack=None if fallback == "none" else dlpack)
    framework.keep = (keep, from_py_object, current_work_stream)
    call = harness.small_or(fdp, ["to_device", "from_dlpack"], ["copy", "copy into"])
    result = None
    try:
        if call == "to_device":
            result = ab.to_device(framework(), harness.small_or(fdp, ["cpu"], ["opencl:0", "cuda:0"]))
        elif call == "from_dlpack":
            result = ab.from_dlpack(framework())
        elif call == "copy":
            ab.copy(framework(), np.zeros(source.expected.shape if source.expected is not None else (), np.float32))
        else:
            ab.copy(np.zeros(3, np.float32), framework())
    except Exception as error:
        harness.check_exception(error, producer_raised=fallback == "raise")
    assert usable or calls["export"] == 0, "an unusable table was called"
    if result is not None and usable and export == "tensor":
        harness.check_values(result, source, None)
    del result
    took = usable and export == "tensor"  # a success hands the tensor over; a failure leaves it with the producer
    if took:
        harness.check_deleter(source)
        assert not source.tensor.called_with_error, "the producer's deleter was called with an exception set"
    else:
        assert source.tensor.calls == 0, f"a tensor the package never took was deleted {source.tensor.calls} times"
    assert spare.calls <= 1, "the fallback capsule's tensor was deleted twice"
    assert calls["stream"] == 0 or took, "current_work_stream was asked without a tensor"
    del unraisable[:]


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
