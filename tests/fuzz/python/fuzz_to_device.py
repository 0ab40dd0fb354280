"""Fuzz target: arraybridge.to_device of hand-made DLPack capsules (legacy and
versioned, alone or in a list: to_device_many) with fuzzed descriptors and
arguments. Run by run.sh; python fuzz_to_device.py [libFuzzer flags] [corpus]."""
import sys

import atheris

with atheris.instrument_imports(include=["harness", "arraybridge"]):
    import harness
    from harness import ab


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    sources = [harness.Source(fdp) for _ in range(harness.small_or(fdp, [1], [2, 3]))]
    capsules = [s.tensor.capsule() for s in sources]
    device, copy, dtype = harness.draw_device(fdp), harness.draw_copy(fdp), harness.draw_dtype(fdp)
    stream = harness.draw_stream(fdp)
    keywords = dict(copy=copy, dtype=dtype, strict=fdp.ConsumeBool(), contiguous=fdp.ConsumeBool(),
                    non_blocking=fdp.ConsumeBool())
    if len(capsules) == 1:
        keywords["stream"] = stream
    bad_argument = harness.refused_before_import(device, copy, dtype, keywords.get("stream"))
    result = None
    try:
        result = ab.to_device(capsules[0] if len(capsules) == 1 else capsules, device, **keywords)
    except Exception as error:
        harness.check_exception(error)
    assert result is None or not bad_argument, f"to_device took bad arguments {device!r} {keywords}"
    if result is not None:
        for moved, source in zip([result] if len(sources) == 1 else result, sources):
            harness.check_values(moved, source, dtype)
            assert moved.read_only or not source.read_only or moved.report.path != "zero_copy", \
                "a read-only source came back as a writable view"
        del moved, result
    for capsule, source in zip(capsules, sources):
        harness.check_capsule(capsule, source, untouched=bad_argument)
        harness.check_deleter(source)


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
