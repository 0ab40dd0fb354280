#!/usr/bin/env bash
# Runs the Rust workspace's tests (arraybridge-sys and arraybridge) offline against
# the built library and sums cargo's results into one line: "rust: N passed, M failed".
# Usage: bash rust/run.sh [BUILD_DIR]   (default: build; relative to the repository root)
set -uo pipefail
cd "$(dirname "$0")"
PATH="$PATH:$HOME/.cargo/bin"  # a rustup install that the shell's PATH does not list
build=$(cd .. && realpath "${1:-build}")
# No dependencies to pin, and each cargo writes a lock format older ones reject:
# the lock file is made afresh and removed after the run.
rm -f Cargo.lock
output=$(CARGO_TARGET_DIR="$build/rust" ARRAYBRIDGE_LIB_DIR="$build/lib" cargo test --offline --quiet --workspace 2>&1)
rc=$?
rm -f Cargo.lock
printf '%s\n' "$output" | grep -v '^warning\|^ *|\|^ *=\|^$\|^SKIP ' | tail -40
printf '%s\n' "$output" | grep '^SKIP ' || true  # tests that had nothing to run on, and why
passed=$(printf '%s\n' "$output" | sed -n 's/^test result: [a-zA-Z]*\. \([0-9]*\) passed; \([0-9]*\) failed.*/\1/p' | awk '{s += $1} END {print s + 0}')
failed=$(printf '%s\n' "$output" | sed -n 's/^test result: [a-zA-Z]*\. \([0-9]*\) passed; \([0-9]*\) failed.*/\2/p' | awk '{s += $1} END {print s + 0}')
echo "rust: ${passed:-0} passed, ${failed:-0} failed"
exit $rc
