# The step runner that dev/gpu_check.sh and dev/gpu_extras.sh source. The caller sets
# $out (the folder of the steps' logs), $summary (the file of their one-line verdicts)
# and failed=0.
#   note TEXT...        a line in $summary, shown too
#   step NAME COMMAND...
#                       runs it, logs to $out/NAME.txt, notes PASSED/FAILED with the
#                       time taken (and, when it failed, its last line); counts failures
#   skip NAME WHY       notes it SKIPPED and why
note() { printf '%s\n' "$*" | tee -a "$summary"; }
step() {
  local name=$1 start rc
  shift
  start=$(date +%s)
  "$@" > "$out/$name.txt" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then
    note "$(printf '%-12s PASSED  (%ss)' "$name" $(($(date +%s) - start)))"
  else
    note "$(printf '%-12s FAILED  rc=%s (%ss), see %s.txt: %s' "$name" $rc $(($(date +%s) - start)) "$name" "$(grep -v "^[[:space:]]*$" "$out/$name.txt" | tail -1 | cut -c1-100)")"
    failed=$((failed + 1))
  fi
}
skip() { note "$(printf '%-12s SKIPPED %s' "$1" "$2")"; }
