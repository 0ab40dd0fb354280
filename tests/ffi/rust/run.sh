#!/usr/bin/env bash
# Runs the Rust FFI crate's tests offline against the built library and sums
# cargo's results into one line: "rust: N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")"
PATH="$PATH:$HOME/.cargo/bin"  # a rustup install that the shell's PATH does not list
build=$(cd ../../.. && realpath "${1:-build}")
rm -f Cargo.lock  # no dependencies to pin, and each cargo writes a lock format older ones reject
output=$(CARGO_TARGET_DIR="$build/rust" ARRAYBRIDGE_LIB_DIR="$build/lib" cargo test --offline --quiet 2>&1)
rc=$?
printf '%s\n' "$output" | grep -v '^warning\|^ *|\|^ *=\|^$' | tail -40
passed=$(printf '%s\n' "$output" | sed -n 's/^test result: [a-zA-Z]*\. \([0-9]*\) passed; \([0-9]*\) failed.*/\1/p' | awk '{s += $1} END {print s + 0}')
failed=$(printf '%s\n' "$output" | sed -n 's/^test result: [a-zA-Z]*\. \([0-9]*\) passed; \([0-9]*\) failed.*/\2/p' | awk '{s += $1} END {print s + 0}')
echo "rust: ${passed:-0} passed, ${failed:-0} failed"
exit $rc
