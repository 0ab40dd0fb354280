#!/usr/bin/env bash
# Runs fuzz_transfer for a bounded time: the committed seeds (corpus/) and every
# past crash (regressions/) first, then new inputs kept in BUILD/fuzz/corpus.
# Usage: run.sh BUILD SECONDS. Prints the executions and coverage reached.
set -uo pipefail
build=${1:-build}
seconds=${2:-20}
here=$(cd "$(dirname "$0")" && pwd)
work=$build/fuzz/corpus
mkdir -p "$work" "$here/regressions"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
ASAN_OPTIONS=detect_leaks=1 "$build"/fuzz/fuzz-transfer -max_total_time="$seconds" -print_final_stats=1 \
  -timeout=10 -rss_limit_mb=4096 -artifact_prefix="$build/fuzz/" \
  "$work" "$here/corpus" "$here/regressions" >"$log" 2>&1
rc=$?
# libFuzzer writes "#N<TAB>DONE cov: ... ft: ... corp: ..." as its last status line.
grep -E "^(INFO: seed corpus|#[0-9]+[[:space:]]+DONE)|ERROR|SUMMARY|crash-|stat::number_of_executed_units" "$log" | tail -8
executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
coverage=$(grep -E "^#[0-9]+[[:space:]]+DONE" "$log" | grep -oE "cov: [0-9]+ ft: [0-9]+" | tail -1)
echo "fuzz: ${executions:-?} executions in ${seconds}s, $coverage, corpus $(ls "$work" | wc -l) new inputs"
if [ $rc -ne 0 ]; then
  echo "fuzz: FAILED (rc $rc); the input is in $build/fuzz/ - copy it to tests/fuzz/regressions/ once fixed"
  tail -40 "$log"
fi
exit $rc
