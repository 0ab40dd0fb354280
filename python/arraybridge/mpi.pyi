from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Literal

from . import Tensor

def cuda_aware() -> bool: ...
def buffer(x: Any, mode: Literal["r", "w", "rw"] = "rw", *, cuda_aware: bool | None = None,
           host_staging: bool = True, strict: bool | None = None) -> AbstractContextManager[Tensor]: ...
