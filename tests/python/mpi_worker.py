"""One rank of the MPI tests (tests/python/test_mpi.py), started by mpirun:
`python mpi_worker.py SCENARIO`. Each rank prints "rank N ok" when every check
of the scenario held; an AssertionError ends it with the reason."""
import os
import sys
import time

import numpy as np
from mpi4py import MPI

import arraybridge as ab

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
DTYPES = (np.float32, np.float64, np.int32, np.int64, np.uint8, np.complex128)


def host_tensors():
    """cpu tensors straight to mpi4py, zero-copy both ways: received values land in
    the NumPy array the tensor views."""
    for dtype in DTYPES:
        mine = np.arange(12, dtype=dtype).reshape(3, 4) + rank
        tensor = ab.to_device(mine, "cpu")
        with ab.mpi.buffer(tensor) as buffer:
            assert buffer.data_ptr == tensor.data_ptr and buffer.report.path == "zero_copy", buffer.report
        if rank == 0:
            for peer in range(1, size):
                comm.Send(tensor, dest=peer, tag=1)
        else:
            landing = np.zeros_like(mine)
            comm.Recv(ab.to_device(landing, "cpu"), source=0, tag=1)
            np.testing.assert_array_equal(landing, np.arange(12, dtype=dtype).reshape(3, 4))
        total = np.zeros_like(mine)
        comm.Allreduce(tensor, ab.to_device(total, "cpu"), op=MPI.SUM)
        expected = sum(np.arange(12, dtype=dtype).reshape(3, 4) + r for r in range(size))
        np.testing.assert_array_equal(total, expected)
        shared = np.arange(5, dtype=dtype) if rank == 0 else np.zeros(5, dtype=dtype)
        comm.Bcast(ab.to_device(shared, "cpu"), root=0)
        np.testing.assert_array_equal(shared, np.arange(5, dtype=dtype))
    # Non-blocking, around the ring.
    outgoing = ab.to_device(np.full(1000, rank, np.int64), "cpu")
    incoming = np.full(1000, -1, np.int64)
    requests = [comm.Isend(outgoing, dest=(rank + 1) % size, tag=2),
                comm.Irecv(ab.to_device(incoming, "cpu"), source=(rank - 1) % size, tag=2)]
    MPI.Request.Waitall(requests)
    assert (incoming == (rank - 1) % size).all(), incoming[:4]


def strided_tensors():
    """A strided tensor is packed for MPI and what arrives is scattered back."""
    base = np.zeros((4, 6), np.float64)
    view = base[:, ::2]  # strided: MPI takes only compact buffers
    try:
        comm.Bcast(ab.from_dlpack(view), root=0)  # refused before anything is sent, on every rank
        raise AssertionError("mpi4py took a strided tensor")
    except BufferError:
        pass
    with ab.mpi.buffer(view, "w") as buffer:
        assert buffer.report.path == "host_copy", buffer.report
        comm.Bcast(buffer, root=0) if rank else comm.Bcast(ab.to_device(np.arange(12.0).reshape(4, 3), "cpu"), root=0)
    if rank:
        np.testing.assert_array_equal(base[:, ::2], np.arange(12.0).reshape(4, 3))
        assert (base[:, 1::2] == 0).all(), "the write-back touched elements outside the view"


def cuda_tensors():
    """Under the fake CUDA driver (an MPI that is not CUDA-aware): cuda:0 tensors go
    through pinned host memory, cuda_host tensors as they are, host_staging=False refuses."""
    values = np.arange(64, dtype=np.float32) * (rank + 1)
    on_device = ab.to_device(values, "cuda:0")
    with ab.mpi.buffer(on_device, "r") as buffer:
        assert buffer.device == "cuda_host" and buffer.report.path == "device_to_host", buffer.report
        total = ab.to_device(np.zeros(64, np.float32), "cuda:0")
        with ab.mpi.buffer(total, "w") as landing:
            comm.Allreduce(buffer, landing, op=MPI.SUM)
    expected = np.arange(64, dtype=np.float32) * sum(range(1, size + 1))
    np.testing.assert_array_equal(np.from_dlpack(total.to("cpu")), expected)
    pinned = ab.to_device(values, "cuda_host")
    with ab.mpi.buffer(pinned) as buffer:  # a Tensor's buffer is a view: its report names this call's path
        assert buffer.data_ptr == pinned.data_ptr and buffer.report.path == "zero_copy", buffer.report
    try:
        with ab.mpi.buffer(on_device, host_staging=False):
            raise AssertionError("host_staging=False let a CUDA tensor through host memory")
    except ab.CopyRequiredError as error:
        assert "not CUDA-aware" in str(error), error
    with ab.mpi.buffer(on_device, cuda_aware=True) as buffer:  # as a CUDA-aware MPI would take it
        assert buffer.data_ptr == on_device.data_ptr and buffer.report.path == "zero_copy", buffer.report


def opencl_tensors():
    """An OpenCL tensor's data is a cl_mem, not an address: handed straight to mpi4py
    it is refused (mpi4py asks for it with stream=-1), and mpi.buffer stages it
    through host memory both ways."""
    values = np.arange(8, dtype=np.float32) * (rank + 1)
    tensor = ab.to_device(values, "opencl:0")
    try:
        comm.Sendrecv(tensor, dest=rank, recvbuf=np.zeros(8, np.float32), source=rank)
        raise AssertionError("mpi4py took an OpenCL tensor's cl_mem as an address")
    except BufferError as error:
        assert "its data is a handle (a cl_mem), not an address" in str(error) and "mpi.buffer" in str(error), error
    with ab.mpi.buffer(tensor, "r") as buffer:
        assert buffer.device == "cpu" and buffer.report.path == "device_to_host", buffer.report
        if rank == 0:
            for peer in range(1, size):
                comm.Send(buffer, dest=peer, tag=4)
    landing = ab.to_device(np.zeros(8, np.float32), "opencl:0")
    if rank:
        with ab.mpi.buffer(landing, "w") as buffer:
            comm.Recv(buffer, source=0, tag=4)
        np.testing.assert_array_equal(np.from_dlpack(landing.to("cpu")), np.arange(8, dtype=np.float32))


def rank_dies():
    """Rank 1 exits in the middle of an exchange: the job must end with an error."""
    payload = ab.to_device(np.ones(1 << 20, np.float64), "cpu")  # rendezvous size: Send blocks until received
    if rank == 1:
        os._exit(3)
    if rank == 0:
        comm.Send(payload, dest=1, tag=3)
    time.sleep(60)


if __name__ == "__main__":
    {"host": host_tensors, "strided": strided_tensors, "cuda": cuda_tensors, "opencl": opencl_tensors,
     "dies": rank_dies}[sys.argv[1]]()
    comm.Barrier()
    print(f"rank {rank} ok", flush=True)
