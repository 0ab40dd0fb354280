#!/usr/bin/env bash
# Without a usable driver the library still loads, works for the CPU and OpenCL,
# and says why CUDA is unavailable: a missing libcuda, and cuInit failing with
# the driver/runtime mismatch code (through the fake driver).
set -u
build=${1:-build}
info=$build/bin/arraybridge-info
passed=0 failed=0
expect() {  # name, pattern, command...
  local name=$1 pattern=$2
  shift 2
  local out
  out=$("$@" 2>&1)
  if printf '%s\n' "$out" | grep -qF -- "$pattern"; then passed=$((passed + 1))
  else failed=$((failed + 1)); echo "FAILED: $name: no '$pattern' in:"; printf '%s\n' "$out"; fi
}
expect "no driver" "cuda    unavailable  CUDA unavailable: cannot load the CUDA driver /nonexistent/libcuda.so.1" \
  env ARRAYBRIDGE_CUDA_LIBRARY=/nonexistent/libcuda.so.1 "$info"
expect "cuInit mismatch" "CUDA unavailable: cuInit failed: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803)" \
  env ARRAYBRIDGE_CUDA_LIBRARY="$build/fake-cuda/libcuda.so.1" FAKE_CUDA_INIT_ERROR=803 "$info"
expect "no devices" "CUDA unavailable: the driver found no CUDA device" \
  env ARRAYBRIDGE_CUDA_LIBRARY="$build/fake-cuda/libcuda.so.1" FAKE_CUDA_DEVICES=0 "$info"
expect "OpenCL still there" "opencl  available" \
  env ARRAYBRIDGE_CUDA_LIBRARY=/nonexistent/libcuda.so.1 "$info"
expect "fake devices" "Fake CUDA device 1 (sm_90)" env ARRAYBRIDGE_CUDA_LIBRARY="$build/fake-cuda/libcuda.so.1" "$info"
echo "cuda-unavailable: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
