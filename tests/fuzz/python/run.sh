#!/usr/bin/env bash
# Runs each Python fuzz target (atheris) for a bounded time: its committed
# regression inputs (regressions/<target>/) first, then new inputs kept in
# BUILD/fuzz-python/<target>/. Usage: run.sh BUILD [SECONDS per target, default 30].
# Prints the executions per target; a finding's input is left in BUILD/fuzz-python/.
# FUZZ_SEED=N makes the run repeatable (make test sets it: a CI failure then happens
# again here); unset, each run explores afresh.
set -uo pipefail
build=${1:-build}
seconds=${2:-30}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
python=$root/.venv/bin/python
failed=0
for target in to_device from_dlpack copy exchange; do
  work=$build/fuzz-python/$target
  mkdir -p "$work" "$here/regressions/$target"
  log=$(mktemp)
  # -timeout: one input past 20 s is a hang; -rss_limit_mb: a runaway allocation is a finding too.
  "$python" "$here/fuzz_$target.py" -max_total_time="$seconds" ${FUZZ_SEED:+-seed="$FUZZ_SEED"} -print_final_stats=1 -timeout=20 \
    -rss_limit_mb=6144 -artifact_prefix="$build/fuzz-python/$target-" "$work" "$here/regressions/$target" \
    >"$log" 2>&1
  rc=$?
  executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  echo "fuzz-python $target: ${executions:-?} executions in ${seconds}s (${rate:-?}/s), corpus $(ls "$work" | wc -l) inputs"
  if [ $rc -ne 0 ]; then
    echo "fuzz-python $target: FAILED (rc $rc); the input is in $build/fuzz-python/ - fix it, then copy it to" \
      "tests/fuzz/python/regressions/$target/"
    grep -v "^INFO: Instrumenting" "$log" | tail -40
    failed=1
  fi
  rm -f "$log"
done
exit $failed
