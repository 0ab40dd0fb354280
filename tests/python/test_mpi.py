"""arraybridge tensors over MPI (mpi4py on Open MPI), 2 and 4 ranks on this machine
under mpirun: values and dtypes through Send/Recv, Isend/Irecv, Bcast and Allreduce
with no copy on our side, strided tensors packed and scattered back, CUDA tensors
(the fake driver) staged through pinned memory or refused with strict, OpenCL
tensors refused as they are (a cl_mem is not an address) and staged, and a rank
that dies mid-exchange ending the job with an error instead of a hang."""
import os
import re
import shutil
import subprocess
import sys

import pytest

from test_cuda_fake import FAKE

pytest.importorskip("mpi4py", reason="mpi4py is not installed (dev/requirements-test.txt has it)")
MPIRUN = shutil.which("mpirun")
pytestmark = [pytest.mark.skipif(MPIRUN is None, reason="mpirun is not installed (Debian: openmpi-bin)"),
              pytest.mark.slow]  # each starts MPI ranks: 10 s here
WORKER = os.path.join(os.path.dirname(__file__), "mpi_worker.py")


def mpirun(ranks, scenario, timeout=120, **env):
    # Root may run MPI here (CI containers); every rank skips OpenCL discovery it does not need.
    environment = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                       ARRAYBRIDGE_DISABLE_OPENCL="1", OMPI_MCA_btl="self,vader")
    environment.update(env)
    return subprocess.run([MPIRUN, "--oversubscribe", "-n", str(ranks), sys.executable, WORKER, scenario],
                          env=environment, capture_output=True, text=True, timeout=timeout)


def ranks_ok(done):
    """The ranks that printed "rank N ok" (mpirun may interleave their lines)."""
    return sorted(int(n) for n in re.findall(r"rank (\d+) ok", done.stdout))


@pytest.mark.parametrize("ranks", [2, 4])
def test_host_tensors_go_to_mpi_as_they_are(ranks):
    done = mpirun(ranks, "host")
    assert done.returncode == 0, done.stdout + done.stderr
    assert ranks_ok(done) == list(range(ranks)), done.stdout


def test_strided_tensors_are_packed_and_scattered_back():
    done = mpirun(2, "strided")
    assert done.returncode == 0 and ranks_ok(done) == [0, 1], done.stdout + done.stderr


@pytest.mark.parametrize("ranks", [2, 4])
def test_cuda_tensors_are_staged_for_an_mpi_that_is_not_cuda_aware(ranks):
    if not FAKE.exists():
        pytest.skip(f"the fake CUDA driver is not built ({FAKE}): run make test")
    done = mpirun(ranks, "cuda", ARRAYBRIDGE_CUDA_LIBRARY=str(FAKE), ARRAYBRIDGE_MPI_CUDA_AWARE="0")
    assert done.returncode == 0 and ranks_ok(done) == list(range(ranks)), done.stdout + done.stderr


def test_opencl_tensors_are_refused_as_they_are_and_staged_by_mpi_buffer():
    done = mpirun(2, "opencl", ARRAYBRIDGE_DISABLE_OPENCL="0")
    assert done.returncode == 0 and ranks_ok(done) == [0, 1], done.stdout + done.stderr


def test_a_rank_that_dies_mid_exchange_ends_the_job_with_an_error():
    done = mpirun(2, "dies", timeout=90)
    assert done.returncode == 3, done.stdout + done.stderr  # the dying rank's code, passed on by mpirun
    assert ranks_ok(done) == [], done.stdout


# In one process of its own (MPI's singleton init, no mpirun): MPI writes into mpi.buffer's memory itself.
AUTOGRAD = """
import numpy as np, torch
from mpi4py import MPI
import arraybridge as ab
import arraybridge.mpi as abmpi
comm = MPI.COMM_SELF

def receive(x, mode="w"):
    with abmpi.buffer(x, mode) as b:
        comm.Sendrecv(np.arange(1, 5, dtype=np.float32), dest=0, recvbuf=b, source=0)
        return b.report.path

viewed = torch.zeros(4)  # written by MPI itself, through a copy back, and through a Tensor viewing it
for twin, x in [(t, t) for t in (torch.zeros(4), torch.zeros(8)[::2])] + [(viewed, ab.to_device(viewed, "cpu"))]:
    w = torch.ones(4, requires_grad=True)
    y = (w * twin).sum()  # saves x
    path = receive(x)
    assert twin.tolist() == [1, 2, 3, 4] and twin._version == 1, (path, twin, twin._version)
    try:
        y.backward()
        raise SystemExit(f"{path}: backward ran on the values MPI wrote")
    except RuntimeError as error:
        assert "modified by an inplace operation" in str(error), error
x = torch.arange(4.0)
with abmpi.buffer(x, "r") as b:  # MPI only reads: no version bump
    comm.Sendrecv(b, dest=0, recvbuf=np.zeros(4, np.float32), source=0)
assert x._version == 0, x._version

read_only = np.zeros(4, np.float32)
read_only.flags.writeable = False
with torch.inference_mode():
    made_in_inference = torch.zeros(4)
refused = [(read_only, "x is marked READ_ONLY; JAX and TensorFlow"),
           (torch.zeros(4, requires_grad=True), "x requires grad"),
           (torch.zeros(2, dtype=torch.complex64).conj(), "x is a conjugate view"),
           (torch.zeros(4)._neg_view(), "x is a negative view"),
           (made_in_inference, "made under torch.inference_mode()")]
for x, words in refused:  # refused before MPI writes: a conj view's copy took MPI's write and dropped it
    try:
        receive(x)
        raise SystemExit(f"mpi.buffer(x, 'w') of {x!r} was not refused")
    except ab.DLPackError as error:
        assert words in str(error), error
    assert not np.asarray(x).any() if isinstance(x, np.ndarray) else not x.detach().resolve_conj().resolve_neg().any()
made = ab.to_device(np.arange(4.0), "cpu", copy=True)  # a Tensor's buffer says this call's path, not its maker's
with abmpi.buffer(made, "r") as b:  # (the docs hunt of 2026-11-30: it was `made` itself, "host_copy")
    assert b.report.path == "zero_copy" and b.data_ptr == made.data_ptr, b.report
capsule = np.zeros(4, np.float32).__dlpack__(max_version=(1, 0))  # a capsule is vetted as the Tensor it becomes
assert receive(capsule) == "zero_copy"
for conjugate in (torch.tensor([1 + 2j, 3 - 1j]).conj(),):  # read: resolved once, not copied again
    with abmpi.buffer(conjugate, "r") as b:
        assert b.report.path == "host_copy", b.report  # the resolved copy, handed to MPI as it is
        assert "resolve" in b.report.detail, b.report
print("autograd ok")
"""


@pytest.mark.skipif(not __import__("importlib").util.find_spec("torch"), reason="torch is not installed")
def test_mpi_writes_are_seen_by_autograd_and_what_a_copy_refuses_is_refused():
    done = subprocess.run([sys.executable, "-c", AUTOGRAD], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, ARRAYBRIDGE_DISABLE_OPENCL="1", OMPI_ALLOW_RUN_AS_ROOT="1",
                                   OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self,vader"))
    assert done.returncode == 0 and "autograd ok" in done.stdout, done.stdout + done.stderr


def test_cuda_aware_is_the_answer_of_the_mpi_library_mpi4py_loaded():
    """mpi4py up to 4.1 has no Query_cuda_support, so cuda_aware() said False for every
    MPI, and mpi.buffer staged CUDA tensors through host memory for a CUDA-aware one too.
    Now the loaded libmpi is asked: Open MPI here, built without CUDA, answers 0 itself."""
    code = ("from mpi4py import MPI; import arraybridge as ab; from arraybridge import _mpi; "
            "print(_mpi._mpi_library_answer(), ab.mpi.cuda_aware())")
    environment = {k: v for k, v in os.environ.items() if k != "ARRAYBRIDGE_MPI_CUDA_AWARE"}
    environment.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", ARRAYBRIDGE_DISABLE_OPENCL="1")
    done = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]  # its own answer, not None (no query found)
    done = subprocess.run([sys.executable, "-c", code], env=dict(environment, ARRAYBRIDGE_MPI_CUDA_AWARE="1"),
                          capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "True"], done.stderr  # the variable first



@pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")), reason="no C compiler to build the stub libmpi")
@pytest.mark.parametrize("query, answer", [
    ("int MPIX_Query_cuda_support(void) { return ANSWER; }", "Open MPI"),
    ("int MPIX_GPU_query_support(int type, int *ok) { *ok = type == 0 && ANSWER; return 0; }", "MPICH")])
def test_a_cuda_aware_mpi_library_is_believed(tmp_path, query, answer):
    """The loaded libmpi's own query decides, for Open MPI's and MPICH's: a stub libmpi
    answering yes, then no (no MPI library here is CUDA-aware to ask for real)."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    code = ("import ctypes, sys; ctypes.CDLL(sys.argv[1]); from arraybridge import _mpi; "
            "print(_mpi._mpi_library_answer())")
    for value, said in (("1", "True"), ("0", "False")):
        stub = tmp_path / f"lib{value}" / "libmpi.so.99"
        stub.parent.mkdir()
        subprocess.run([compiler, "-shared", "-fPIC", f"-DANSWER={value}", "-x", "c", "-", "-o", str(stub)],
                       input=query, text=True, check=True)
        done = subprocess.run([sys.executable, "-c", code, str(stub)], capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, ARRAYBRIDGE_DISABLE_OPENCL="1"))
        assert done.stdout.split() == [said], (answer, done.stderr)
