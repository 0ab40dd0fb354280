from __future__ import annotations

import enum
from typing import Any

from . import MemoryConversionError as MemoryConversionError

class MemoryType(str, enum.Enum):
    NUMPY = "numpy"
    CUPY = "cupy"
    TORCH = "torch"
    TENSORFLOW = "tensorflow"
    JAX = "jax"
    PYCLESPERANTO = "pyclesperanto"

CPU_MEMORY_TYPES: frozenset[MemoryType]
GPU_MEMORY_TYPES: frozenset[MemoryType]
SUPPORTED_MEMORY_TYPES: frozenset[MemoryType]

def detect_memory_type(data: object) -> MemoryType: ...
def convert_memory(data: Any, source_type: MemoryType | str, target_type: MemoryType | str, gpu_id: int | None = 0, *,
                   host_staging: bool = True, dtype: Any = None, copy: bool | None = None,
                   strict: bool | None = None) -> Any: ...
