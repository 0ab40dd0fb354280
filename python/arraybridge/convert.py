"""arraybridge.convert: the seed API of the Python project this library grows from.
`convert_memory(data, source_type, target_type, gpu_id)` converts between NumPy, CuPy,
PyTorch, TensorFlow, JAX and pyclesperanto by name, each conversion one planned
transfer (see arraybridge.to_device); `detect_memory_type` names an array's framework.

    from arraybridge import convert
    y = convert.convert_memory(x, "numpy", "torch", gpu_id=0)

Each framework is imported only when a conversion needs it.
"""
from ._errors import MemoryConversionError
from ._seed import (CPU_MEMORY_TYPES, GPU_MEMORY_TYPES, SUPPORTED_MEMORY_TYPES, MemoryType, convert_memory,
                    detect_memory_type)

__all__ = ["CPU_MEMORY_TYPES", "GPU_MEMORY_TYPES", "MemoryConversionError", "MemoryType", "SUPPORTED_MEMORY_TYPES",
           "convert_memory", "detect_memory_type"]
