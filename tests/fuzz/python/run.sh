#!/usr/bin/env bash
# Runs each Python fuzz target (atheris) for a bounded time, as many at once as there
# are cores (JOBS=N: N at once): its committed regression inputs
# (regressions/<target>/) first, then new inputs kept in BUILD/fuzz-python/<target>/.
# Usage: run.sh BUILD [SECONDS per target, default 30].
# Prints the executions per target; a finding's input is left in BUILD/fuzz-python/.
# FUZZ_SEED=N makes the run repeatable (make test sets it: a CI failure then happens
# again here); unset, each run explores afresh.
set -uo pipefail
build=${1:-build}
seconds=${2:-30}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
python=$root/.venv/bin/python
jobs=${JOBS:-$(nproc)}  # each target is one process on one core: as many at once as there are cores
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT

fuzz_one() {  # target: runs it, prints what it found into $results/target, its rc into $results/target.rc
  local target=$1 work=$build/fuzz-python/$1 log=$results/$1.log rc executions rate
  mkdir -p "$work" "$here/regressions/$target"
  # -timeout: one input past 20 s is a hang; -rss_limit_mb: a runaway allocation is a finding too.
  "$python" "$here/fuzz_$target.py" -max_total_time="$seconds" ${FUZZ_SEED:+-seed="$FUZZ_SEED"} -print_final_stats=1 -timeout=20 \
    -rss_limit_mb=6144 -artifact_prefix="$build/fuzz-python/$target-" "$work" "$here/regressions/$target" \
    >"$log" 2>&1
  rc=$?
  executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  {
    echo "fuzz-python $target: ${executions:-?} executions in ${seconds}s (${rate:-?}/s), corpus $(ls "$work" | wc -l) inputs"
    if [ $rc -ne 0 ]; then
      echo "fuzz-python $target: FAILED (rc $rc); the input is in $build/fuzz-python/ - fix it, then copy it to" \
        "tests/fuzz/python/regressions/$target/"
      grep -v "^INFO: Instrumenting" "$log" | tail -40
    fi
  } >"$results/$target"
  echo $rc >"$results/$target.rc"
}

targets="to_device from_dlpack copy exchange"
for target in $targets; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done
  fuzz_one "$target" &
done
wait
failed=0
for target in $targets; do
  cat "$results/$target"
  [ "$(cat "$results/$target.rc")" = 0 ] || failed=1
done
exit $failed
