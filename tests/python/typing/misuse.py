"""Calls the stubs must refuse (test_typing.py): each line's `# expect:` names the mypy
error code it must raise, so the stubs are proved to be read and to be strict."""
import numpy as np

import arraybridge as ab
from arraybridge import convert, mpi, nixl

ab.to_device(np.zeros(2))  # expect: call-overload
ab.to_device(np.zeros(2), "cpu").no_such_attribute  # expect: attr-defined
ab.to_device(np.zeros(2), 0)  # expect: call-overload
convert.convert_memory(np.zeros(2), "numpy", "numpy", host_staging="no")  # expect: arg-type
mpi.buffer(np.zeros(2), "x")  # expect: arg-type
nixl.Peer(5)  # expect: arg-type
ab.no_such_name  # expect: attr-defined
