#!/usr/bin/env bash
# `make` on a machine without the CUDA toolkit: nvcc hidden from PATH and from the
# Makefile's fallback, the library, tools and bench still build (into
# BUILD/no-cuda), the build says CUDA was left out, no CUDA code is in the
# library, and arraybridge-info says why every CUDA device is missing, even with
# a driver present.
set -u
build=${1:-build}
out=$build/no-cuda
passed=0 failed=0
check() {  # name, pattern, text
  if printf '%s\n' "$3" | grep -qF -- "$2"; then passed=$((passed + 1))
  else failed=$((failed + 1)); echo "FAILED: $1: no '$2' in:"; printf '%s\n' "$3" | tail -20; fi
}
path=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v cuda | paste -sd:)
# Unoptimized and without debug information: what is checked is what gets built, and
# that builds in half the time (CI has a budget).
log=$(PATH=$path make --no-print-directory NVCC=/nonexistent/nvcc BUILD="$out" OPT=-O0 -j"${JOBS:-2}" all 2>&1)
rc=$?
check "make succeeds" "rc=0" "rc=$rc
$log"
check "make says so" "CUDA left out of this build: nvcc was not found" "$log"
lib=$(ls "$out"/lib/libarraybridge.so.*.*.* 2>/dev/null | head -1)
symbols=$(nm -C "$lib" 2>/dev/null | grep -c "abr::cuda::" || true)
check "no CUDA code in the library" "cuda symbols: 0" "cuda symbols: $symbols"
info=$(ARRAYBRIDGE_CUDA_LIBRARY="$build/fake-cuda/libcuda.so.1" "$out/bin/arraybridge-info" 2>&1)
check "info names why" "cuda    unavailable  CUDA unavailable: left out of this build (nvcc was not found" "$info"
check "OpenCL still there" "opencl  available" "$info"
check "bench runs" "host copy" "$("$out/bin/arraybridge-bench" --quick --case "host copy" --sizes 4K 2>&1)"
echo "build-without-nvcc: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
