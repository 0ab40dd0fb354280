"""Fuzz target: arraybridge.from_dlpack of hand-made producers: objects whose
__dlpack__ returns a fuzzed capsule (legacy or versioned), the wrong type, a used
capsule, or raises, and that take or refuse DLPack 1.0's keywords."""
import sys

import atheris

with atheris.instrument_imports(include=["harness", "arraybridge"]):
    import harness
    from harness import ab, hd


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    source = harness.Source(fdp)
    behaviour = harness.small_or(fdp, ["capsule"], ["raise", "int", "other name", "raise TypeError"])
    made = []

    def make():
        if behaviour == "raise":
            raise harness.ProducerError("the producer refuses")
        if behaviour == "raise TypeError":
            raise TypeError("the producer refuses")
        if behaviour == "int":
            return 7
        capsule = source.tensor.capsule(hd.OTHER_NAME if behaviour == "other name" else None)
        made.append(capsule)
        return capsule

    producer = hd.Producer(make, keywords=fdp.ConsumeBool())
    device, copy = harness.small_or(fdp, [None], [harness.draw_device(fdp)]), harness.draw_copy(fdp)
    bad_argument = harness.refused_before_import(device, copy, check_device=device is not None)
    result = None
    try:
        result = ab.from_dlpack(producer, device=device, copy=copy)
    except Exception as error:
        harness.check_exception(error, producer_raised=behaviour == "raise")
    assert not bad_argument or (result is None and producer.calls == 0), "bad arguments reached the producer"
    if result is not None:
        assert behaviour == "capsule", f"from_dlpack took a producer that gave {behaviour}"
        harness.check_values(result, source, None)
        del result
    for capsule in made:
        if behaviour == "capsule":
            harness.check_capsule(capsule, source, untouched=False)
        else:
            source.tensor.delete()
    if made:
        harness.check_deleter(source)


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
