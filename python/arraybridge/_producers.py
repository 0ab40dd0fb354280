"""What other frameworks' producers are known to do, asked once per type by the C
import (_core): whose arrays are immutable (what we import from them is read-only),
and whose own DLPack export can abort the process (vetted before it is asked)."""
import importlib

from ._errors import DLPackError

IMMUTABLE = 1  # _core's PRODUCER_IMMUTABLE
VETTED = 2     # _core's PRODUCER_VETTED

_IMMUTABLE_ROOTS = frozenset({"jax", "jaxlib", "tensorflow"})

# TensorFlow dtypes that hold no numbers: TensorFlow's own export aborts the process
# on them (rc 134), so they are refused before it is asked.
_TENSORFLOW_NOT_NUMBERS = frozenset({"string", "resource", "variant"})


def producer_traits(cls):
    """IMMUTABLE and VETTED bits for arrays of `cls` (or of a subclass of theirs)."""
    roots = {base.__module__.partition(".")[0] for base in cls.__mro__}
    return (IMMUTABLE if roots & _IMMUTABLE_ROOTS else 0) | (VETTED if "tensorflow" in roots else 0)


def vet_producer(data):
    """What to import in place of a TensorFlow object: a variable's value, the legacy
    capsule of a tensor without __dlpack__ (TensorFlow before 2.15), or a DLPackError
    for what DLPack cannot carry."""
    tf = importlib.import_module("tensorflow")
    if isinstance(data, (tf.RaggedTensor, tf.SparseTensor)):
        raise DLPackError(f"arraybridge: a tf.{type(data).__name__} has no one dense buffer for DLPack; "
                          "convert its .to_tensor() (or tf.sparse.to_dense) instead")
    if isinstance(data, tf.Variable):
        data = data.read_value()  # a tensor of the variable's current value
    dtype = getattr(data, "dtype", None)
    if dtype is not None and getattr(dtype, "name", None) in _TENSORFLOW_NOT_NUMBERS:
        raise DLPackError(f"arraybridge: TensorFlow {dtype.name} tensors hold no numbers that DLPack can carry")
    if not hasattr(data, "__dlpack__"):
        return tf.experimental.dlpack.to_dlpack(data)
    return data
