#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time: its seeds and every past finding
# first, then new inputs kept in BUILD/fuzz/corpus[-ipc].
#   transfer: fuzz_transfer; seeds in corpus/, findings in regressions/.
#   ipc:      fuzz_ipc_import against the fake CUDA driver; seeds are handles this
#             run exports (written to BUILD/fuzz/ipc-seeds at start), findings in
#             regressions-ipc/.
#   both:     the two at once, each on a core of its own (CI has a budget).
# Usage: run.sh transfer|ipc|both BUILD SECONDS. Prints the executions and coverage reached.
set -uo pipefail
target=${1:-}
build=${2:-build}
seconds=${3:-20}
here=$(cd "$(dirname "$0")" && pwd)
if [ "$target" = both ]; then
  logs=$(mktemp -d)
  bash "$0" transfer "$build" "$seconds" >"$logs/transfer" 2>&1 & transfer=$!
  bash "$0" ipc "$build" "$seconds" >"$logs/ipc" 2>&1 & ipc=$!
  wait $transfer; rc_transfer=$?
  wait $ipc; rc_ipc=$?
  cat "$logs/transfer" "$logs/ipc"
  rm -rf "$logs"
  exit $((rc_transfer | rc_ipc))
fi
case $target in
  transfer)
    name=fuzz binary=fuzz-transfer work=$build/fuzz/corpus regressions=$here/regressions prefix=$build/fuzz/
    seeds=$here/corpus extra=() env=()
    ;;
  ipc)
    name=fuzz-ipc binary=fuzz-ipc-import work=$build/fuzz/corpus-ipc regressions=$here/regressions-ipc
    prefix=$build/fuzz/ipc- seeds=$build/fuzz/ipc-seeds
    rm -rf "$seeds"
    # Handles up to 1600 bytes: longer than abr_ipc_handle.data (1528), which must be refused.
    extra=(-max_len=1600)
    env=(FUZZ_IPC_SEEDS="$seeds" ARRAYBRIDGE_CUDA_LIBRARY="$(cd "$build" && pwd)/fake-cuda/libcuda.so.1")
    ;;
  *) echo "run.sh: target '$target' is neither transfer, ipc nor both (usage: run.sh transfer|ipc|both BUILD SECONDS)" >&2; exit 2 ;;
esac
mkdir -p "$work" "$seeds" "$regressions"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
env "${env[@]}" ASAN_OPTIONS=detect_leaks=1 "$build/fuzz/$binary" -max_total_time="$seconds" -print_final_stats=1 \
  "${extra[@]}" -timeout=10 -rss_limit_mb=4096 -artifact_prefix="$prefix" \
  "$work" "$seeds" "$regressions" >"$log" 2>&1
rc=$?
# libFuzzer writes "#N<TAB>DONE cov: ... ft: ... corp: ..." as its last status line.
grep -E "^(INFO: seed corpus|#[0-9]+[[:space:]]+DONE)|ERROR|SUMMARY|crash-|stat::number_of_executed_units" "$log" | tail -8
executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
coverage=$(grep -E "^#[0-9]+[[:space:]]+DONE" "$log" | grep -oE "cov: [0-9]+ ft: [0-9]+" | tail -1)
echo "$name: ${executions:-?} executions in ${seconds}s, $coverage, corpus $(ls "$work" | wc -l) new inputs"
if [ $rc -ne 0 ]; then
  echo "$name: FAILED (rc $rc); the input is in ${prefix}* - copy it to tests/fuzz/${regressions##*/}/ once fixed"
  tail -40 "$log"
fi
exit $rc
