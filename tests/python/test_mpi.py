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
