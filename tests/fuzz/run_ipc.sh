#!/usr/bin/env bash
# Runs fuzz_ipc_import for a bounded time against the fake CUDA driver: handles this
# run exports (written to BUILD/fuzz/ipc-seeds at start) and every past finding
# (regressions-ipc/) first, then new inputs kept in BUILD/fuzz/corpus-ipc.
# Usage: run_ipc.sh BUILD SECONDS. Prints the executions and coverage reached.
set -uo pipefail
build=${1:-build}
seconds=${2:-20}
here=$(cd "$(dirname "$0")" && pwd)
work=$build/fuzz/corpus-ipc
seeds=$build/fuzz/ipc-seeds
rm -rf "$seeds"
mkdir -p "$work" "$seeds" "$here/regressions-ipc"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# Handles up to 1600 bytes: longer than abr_ipc_handle.data (1528), which must be refused.
FUZZ_IPC_SEEDS=$seeds ARRAYBRIDGE_CUDA_LIBRARY=$(cd "$build" && pwd)/fake-cuda/libcuda.so.1 ASAN_OPTIONS=detect_leaks=1 \
  "$build"/fuzz/fuzz-ipc-import -max_total_time="$seconds" -print_final_stats=1 -max_len=1600 \
  -timeout=10 -rss_limit_mb=4096 -artifact_prefix="$build/fuzz/ipc-" \
  "$work" "$seeds" "$here/regressions-ipc" >"$log" 2>&1
rc=$?
# libFuzzer writes "#N<TAB>DONE cov: ... ft: ... corp: ..." as its last status line.
grep -E "^(INFO: seed corpus|#[0-9]+[[:space:]]+DONE)|ERROR|SUMMARY|crash-|stat::number_of_executed_units" "$log" | tail -8
executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
coverage=$(grep -E "^#[0-9]+[[:space:]]+DONE" "$log" | grep -oE "cov: [0-9]+ ft: [0-9]+" | tail -1)
echo "fuzz-ipc: ${executions:-?} executions in ${seconds}s, $coverage, corpus $(ls "$work" | wc -l) new inputs"
if [ $rc -ne 0 ]; then
  echo "fuzz-ipc: FAILED (rc $rc); the input is in $build/fuzz/ipc-* - copy it to tests/fuzz/regressions-ipc/ once fixed"
  tail -40 "$log"
fi
exit $rc
