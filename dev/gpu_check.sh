#!/usr/bin/env bash
# `make gpu-check`: everything a GPU machine can tell us, in one dated folder.
#
#   dev/gpu_check.sh [--no-build] [OUT_DIR]
#
# Steps (each logged to OUT_DIR/<step>.txt, judged in OUT_DIR/summary.txt):
#   machine       date, commit, CPU, cores, GPU, NVIDIA driver, CUDA, nvcc, OpenCL ICDs
#   build         the library, tests and tools (left out with --no-build)
#   cuda-tests    on the real driver when one loads, else on the fake (saying so)
#   memcheck, memcheck-exit, racecheck, synccheck, initcheck
#                 compute-sanitizer over cuda-tests (memcheck with leak checking and
#                 stream-ordered race tracking; memcheck-exit the test whose child
#                 exits with its runtime alive, without the leak check); need a GPU
#                 and compute-sanitizer
#   unit-tests    with every OpenCL driver registered here (PoCL, NVIDIA's, ...), the
#                 loader in the shared namespace (the default), and the CUDA driver
#                 loaded (the fake one without a GPU)
#   unit-tests-private-namespace
#                 the same with ARRAYBRIDGE_OPENCL_NAMESPACE=private (a link-map
#                 namespace of its own) and CUDA left out (none is taken beside the
#                 CUDA driver, nor the driver loaded beside one)
#   python        the Python suite (torch, CuPy and JAX where installed); needs a GPU
#                 (without one, make test's python suites are the same tests)
#   bench-cuda    arraybridge-bench --device cuda, JSON with device, driver, CUDA, CPU,
#                 cores and commit; on the fake only a smoke run (its timings mean nothing)
#   soak          make soak's 10^6 transfers on 8 threads with CUDA on the real driver,
#                 failing on a growing figure (tests/soak/); needs a GPU (make test runs
#                 a short one on the fake)
# Without a GPU it runs end to end against the fake driver and marks each step that
# needs real hardware SKIPPED with the reason. Exits non-zero if any step FAILED.
set -u
cd "$(dirname "$0")/.."
build=${BUILD:-build}
do_build=1
if [ "${1:-}" = "--no-build" ]; then do_build=0; shift; fi

python=${PYTHON:-}
[ -z "$python" ] && { [ -x .venv/bin/python ] && python=.venv/bin/python || python=python3; }
commit=${ARRAYBRIDGE_COMMIT:-$(git rev-parse HEAD 2>/dev/null || cat COMMIT 2>/dev/null || echo unknown)}
export ARRAYBRIDGE_COMMIT=$commit

# A real driver: libcuda.so.1 loads and reports at least one device.
real_gpu=0
gpu_name=""
if command -v nvidia-smi >/dev/null 2>&1; then
  gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  [ -n "$gpu_name" ] && real_gpu=1
fi
slug=$(printf '%s' "${gpu_name:-no-gpu}" | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-')
out=${1:-$([ $real_gpu = 1 ] && echo "bench/results/$(date +%F)-gpu-check-$slug" || echo "$build/gpu-check/$(date +%F)-$slug")}
mkdir -p "$out"
summary=$out/summary.txt
: > "$summary"
failed=0

# note, step and skip (dev/steps.sh) log each step here and judge it in $summary.
source dev/steps.sh

{
  echo "date:    $(date -u +%FT%TZ)"
  echo "commit:  $commit"
  echo "cpu:     $(sed -n 's/^model name\t: //p' /proc/cpuinfo | head -1)"
  echo "cores:   $(nproc)"
  echo "gpu:     ${gpu_name:-none (no nvidia-smi, or it lists no GPU)}"
  echo "nvidia:  $(head -1 /proc/driver/nvidia/version 2>/dev/null || echo 'no NVIDIA kernel driver')"
  echo "nvcc:    $( (command -v nvcc >/dev/null && nvcc --version | tail -2 | head -1) || echo 'not found')"
  echo "opencl:  $(ls /etc/OpenCL/vendors/ 2>/dev/null | tr '\n' ' ')"
  echo "python:  $($python --version 2>&1)"
} > "$out/machine.txt"
note "gpu-check $(date +%F) in $out"
sed 's/^/  /' "$out/machine.txt" | tee -a "$summary"

if [ $do_build = 1 ]; then
  step build make -j"$(nproc)" all "$build/bin/cuda-tests" "$build/bin/unit-tests" "$build/bin/arraybridge-soak"
else
  skip build "--no-build: using the binaries in $build"
fi
[ -x "$build/bin/arraybridge-info" ] && "$build/bin/arraybridge-info" > "$out/arraybridge-info.txt" 2>&1

if [ $real_gpu = 1 ]; then
  step cuda-tests env ARRAYBRIDGE_CUDA_LIBRARY=libcuda.so.1 "$build/bin/cuda-tests"
  if command -v compute-sanitizer >/dev/null 2>&1; then
    # The sticky-error tests fault on purpose; every other test runs under each tool.
    # The exit test's child ends with its runtime alive, as every Python process does,
    # so its device memory is still held when it exits: the leak check leaves that
    # test out, and memcheck without it looks for the child's bad accesses.
    exits_alive="*ending with its runtime alive*"
    sanitize() {
      local tool=$1 cases=$2
      compute-sanitizer --tool "$tool" "${@:3}" --error-exitcode 1 \
        env ARRAYBRIDGE_CUDA_LIBRARY=libcuda.so.1 "$build/bin/cuda-tests" "$cases"
    }
    step memcheck sanitize memcheck -tce="*sticky*,$exits_alive" --leak-check full --track-stream-ordered-races all
    step memcheck-exit sanitize memcheck -tc="$exits_alive" --track-stream-ordered-races all
    step racecheck sanitize racecheck -tce="*sticky*"
    step synccheck sanitize synccheck -tce="*sticky*"
    step initcheck sanitize initcheck -tce="*sticky*"
  else
    for tool in memcheck memcheck-exit racecheck synccheck initcheck; do skip $tool "compute-sanitizer is not on PATH"; done
  fi
else
  step cuda-tests "$build/bin/cuda-tests"  # no ARRAYBRIDGE_CUDA_LIBRARY: the fake driver
  note "             (no GPU: cuda-tests ran against the fake driver, tests/cuda/fake_driver.cpp)"
  for tool in memcheck memcheck-exit racecheck synccheck initcheck; do skip $tool "no GPU: compute-sanitizer needs real hardware"; done
fi

# The unit tests load a CUDA driver too where one is found: the real one on a GPU, the
# fake here, so that a step broken beside a loaded driver breaks here as well.
[ $real_gpu = 1 ] && cuda_library=libcuda.so.1 || cuda_library=$PWD/$build/fake-cuda/libcuda.so.1
step unit-tests env ARRAYBRIDGE_CUDA_LIBRARY="$cuda_library" "$build/bin/unit-tests"
# No namespace of its own is taken beside a loaded CUDA driver (opencl/loader.hpp), so
# this step leaves CUDA out: the C library reads no ARRAYBRIDGE_DISABLE_CUDA (only the
# Python package does), and a driver that is not there is never loaded.
step unit-tests-private-namespace env ARRAYBRIDGE_OPENCL_NAMESPACE=private \
  ARRAYBRIDGE_CUDA_LIBRARY=/nonexistent/libcuda.so.1 "$build/bin/unit-tests"
if [ $real_gpu = 1 ]; then
  step python "$python" -m pytest -q -rs -p no:cacheprovider tests/python
else
  # The same tests as make test's python and python-slow suites, which CI runs anyway
  # (running them twice cost CI 12 minutes of its budget).
  skip python "no GPU: make test's python and python-slow suites run these tests"
fi

if [ $real_gpu = 1 ]; then
  step bench-cuda "$build/bin/arraybridge-bench" --device cuda --json "$out/bench-cuda.json"
else
  step bench-cuda env ARRAYBRIDGE_CUDA_LIBRARY="$PWD/$build/fake-cuda/libcuda.so.1" \
    "$build/bin/arraybridge-bench" --device cuda --sizes 1M --reps 1 --json "$out/bench-cuda.json"
  note "             (no GPU: a smoke run on the fake driver; its timings mean nothing)"
fi

if [ $real_gpu = 1 ]; then
  step soak env ARRAYBRIDGE_CUDA_LIBRARY=libcuda.so.1 "$build/bin/arraybridge-soak" --transfers 1000000 --threads 8 \
    --sample-every 100000 --json "$out/soak.json"
else
  skip soak "no GPU: the soak on the real driver needs one (make test runs soak-short on the fake)"
fi

note "gpu-check: $failed step(s) failed"
[ $failed -eq 0 ]
