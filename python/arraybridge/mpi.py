"""arraybridge.mpi: tensors as MPI buffers (mpi4py), which mpi4py itself is not imported for.

    from arraybridge import mpi
    with mpi.buffer(t, "w") as buf:     # t itself where MPI can use its memory, else one copy
        comm.Recv(buf, source=0)        # t holds what arrived when the block ends

`buffer` hands MPI what it can take: a compact host tensor as it is, a strided one
packed, a CUDA tensor through pinned host memory unless `cuda_aware()` (then as it is),
an OpenCL tensor through host memory.
"""
from ._mpi import mpi_buffer as buffer, mpi_cuda_aware as cuda_aware

__all__ = ["buffer", "cuda_aware"]
