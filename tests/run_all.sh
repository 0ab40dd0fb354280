#!/usr/bin/env bash
# Runs every suite of `make test`, shows their output, and ends with one line
# over all of them: "summary: N passed, M failed" (doctest cases, C checks, and
# one each for script checks). Exits non-zero if anything failed.
set -u
build=${1:-build}
passed=0
failed=0
last_output=""  # the output of the last run, for figures worth repeating in the summary

run() {
  local name=$1
  shift
  echo "== $name: $*"
  local output rc p f
  output=$("$@" 2>&1)
  rc=$?
  last_output=$output
  printf '%s\n' "$output"
  p=$(printf '%s\n' "$output" | sed -n 's/.*test cases: *[0-9]* | *\([0-9]*\) passed | *\([0-9]*\) failed.*/\1/p' | tail -1)
  f=$(printf '%s\n' "$output" | sed -n 's/.*test cases: *[0-9]* | *\([0-9]*\) passed | *\([0-9]*\) failed.*/\2/p' | tail -1)
  if [ -z "$p" ]; then
    p=$(printf '%s\n' "$output" | sed -n 's/^[a-z-]*: *\([0-9]*\) passed, \([0-9]*\) failed.*/\1/p' | tail -1)
    f=$(printf '%s\n' "$output" | sed -n 's/^[a-z-]*: *\([0-9]*\) passed, \([0-9]*\) failed.*/\2/p' | tail -1)
  fi
  if [ -z "$p" ]; then  # pytest: "3 failed, 336 passed, 3 skipped in 2.4s"
    local last
    last=$(printf '%s\n' "$output" | grep -E '[0-9]+ (passed|failed).* in [0-9.]+s' | tail -1)
    if [ -n "$last" ]; then
      p=$(printf '%s\n' "$last" | grep -oE '[0-9]+ passed' | grep -oE '[0-9]+' || echo 0)
      f=$(printf '%s\n' "$last" | grep -oE '[0-9]+ (failed|errors?)' | awk '{s += $1} END {print s + 0}')
      p=${p:-0} f=${f:-0}
    fi
  fi
  if [ -z "$p" ]; then  # a script check: one test
    if [ $rc -eq 0 ]; then p=1 f=0; else p=0 f=1; fi
  elif [ $rc -ne 0 ] && [ "${f:-0}" -eq 0 ]; then
    f=1  # crashed or failed without saying so
  fi
  passed=$((passed + p))
  failed=$((failed + f))
}

run abi bash tests/abi/check_abi.sh "$build"/lib/libarraybridge.so.*.*.*
run unit "$build"/bin/unit-tests
run unit-asan-ubsan env ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 "$build"/asan/bin/unit-tests
run threads-tsan env TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/tsan.supp" "$build"/tsan/bin/thread-tests
run cuda-fake "$build"/bin/cuda-tests
# Again with an H100 machine's 16 staging threads: more, smaller pieces per chunk.
run cuda-fake-16-threads env ARRAYBRIDGE_STAGING_THREADS=16 "$build"/bin/cuda-tests
run cuda-fake-tsan env TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/tsan.supp" "$build"/tsan/bin/cuda-tests
run cuda-fake-asan-ubsan env ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 "$build"/asan/bin/cuda-tests
run cuda-unavailable bash tests/cuda/unavailable.sh "$build"
run c-abi "$build"/bin/c-abi-test
run concurrent-create "$build"/bin/concurrent-create
run c-asan-ubsan env ASAN_OPTIONS=detect_leaks=1 "$build"/asan/bin/abi_test
run install bash tests/install/test_install.sh "$build"
run rust bash tests/ffi/rust/run.sh "$build"
run fuzz bash tests/fuzz/run.sh "$build" "${FUZZ_TEST_SECONDS:-30}"
figures=$(printf '%s\n' "$last_output" | grep -E '^fuzz: [0-9?]+ executions' || echo "fuzz: no figures (see its log above)")
run tools env BUILD="$build" .venv/bin/python -m pytest -q -rs -p no:cacheprovider tests/tools
run python .venv/bin/python -m pytest -q -rs -p no:cacheprovider tests/python
# The same tests under memcheck, judging leaks and bad accesses in our native code.
# Left out: the GIL test (memcheck runs one thread at a time) and the shutdown test
# (its subprocesses run outside memcheck anyway).
run python-valgrind .venv/bin/python tests/python/valgrind_native.py -k "not gil and not shutdown" tests/python

# make gpu-check end to end, here against the fake driver (the GPU-only steps say why they skip).
run gpu-check bash tools/gpu_check.sh --no-build "$build/gpu-check/ci"

echo "$figures"
echo "summary: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
