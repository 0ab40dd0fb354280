#!/usr/bin/env bash
# Installs the Debian packages the build and tests need, only when one is missing.
# Called by `make demo` and `make test`, so a fresh machine needs no manual set-up.
set -euo pipefail

packages=(
  g++ make pkg-config        # toolchain
  libspdlog-dev libfmt-dev   # logging; used header-only so the library links nothing extra
  doctest-dev                # C++ unit tests
  opencl-headers ocl-icd-opencl-dev ocl-icd-libopencl1  # OpenCL API headers and ICD loader
  pocl-opencl-icd clinfo     # a real OpenCL device on the CPU, so OpenCL tests run everywhere
  clang libclang-rt-14-dev   # libFuzzer and sanitizer runtimes
  clang-format               # the C and C++ style check (.clang-format, dev/check_format.sh)
  valgrind                   # leak and memory checks of the Python tests' native part
  openmpi-bin                # mpirun and libmpi for the MPI tests (mpi4py's wheel finds it)
  python3 python3-venv       # the project's Python environment (.venv)
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The Rust crates need cargo; a rustup install on PATH will do as well.
command -v cargo >/dev/null 2>&1 || [ -x "$HOME/.cargo/bin/cargo" ] || dpkg-query -W -f='${Status}' cargo 2>/dev/null | grep -q "install ok installed" ||
  missing+=(cargo)
[ ${#missing[@]} -eq 0 ] && exit 0

echo "bootstrap: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
