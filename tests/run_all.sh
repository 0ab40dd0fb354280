#!/usr/bin/env bash
# Runs the suites of tests/suites.txt (all of them, or with "quick" only the quick
# tier), shows their output, and ends with one line over all of them:
# "summary: N passed, M failed" (doctest cases, C checks, and one each for script
# checks). Exits non-zero if anything failed.
#   [SUITES="name ..."] tests/run_all.sh [build folder] [quick|full]
set -u
build=${1:-build}
tier=${2:-full}
case $tier in quick | full) ;; *) echo "run_all.sh: tier '$tier' is neither quick nor full" >&2; exit 2 ;; esac
passed=0
failed=0
last_output=""  # the output of the last run, for figures worth repeating in the summary
failed_suites=""  # CI shows only the tail of the log: the summary names what failed
suite_seconds=""  # and where the time went, slowest first

run() {
  local name=$1
  shift
  echo "== $name: $*"
  local output rc p f start=$SECONDS
  output=$("$@" 2>&1)
  rc=$?
  last_output=$output
  printf '%s\n' "$output"
  echo "-- $name: $((SECONDS - start)) s"  # CI has a budget (DEVELOPERS.md): where it goes
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
  [ "$f" -eq 0 ] || failed_suites="$failed_suites $name($f)"
  suite_seconds="$suite_seconds$((SECONDS - start)) $name"$'\n'
}

figures="fuzz: not run"
while read -r name suite_tier command; do
  case $name in '' | '#'*) continue ;; esac
  [ "$tier" = full ] || [ "$suite_tier" = quick ] || continue
  [ -z "${SUITES:-}" ] || [[ " $SUITES " == *" $name "* ]] || continue  # SUITES="a b": only those
  eval "run $name $command"
  if [ "$name" = fuzz ]; then
    figures=$(printf '%s\n' "$last_output" | grep -E '^fuzz(-ipc)?: [0-9?]+ executions' || echo "fuzz: no figures (see its log above)")
  fi
done < tests/suites.txt

echo "$figures"
echo "slowest suites (s): $(printf '%s' "$suite_seconds" | sort -rn | head -8 | awk '{ if (NR > 1) printf ", "; printf "%s %s", $2, $1 }')"
[ -z "$failed_suites" ] || echo "failed suites:$failed_suites"
echo "summary: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
