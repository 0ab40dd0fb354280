#!/usr/bin/env bash
# The C and C++ style check: fails naming each file of the tree that clang-format
# (with .clang-format) would change. The public headers are left as written: they are
# the ABI's documentation, aligned by hand. `make format` applies the style.
#   usage: dev/check_format.sh [--fix]
set -uo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format: clang-format is not installed (dev/bootstrap.sh installs it)"; exit 1; }
mapfile -t files < <(git ls-files '*.c' '*.cpp' '*.hpp' '*.h' '*.cu' | grep -v '^include/arraybridge/')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  echo "format: ${#files[@]} files formatted"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "format: $f differs from .clang-format (make format, or dev/check_format.sh --fix, rewrites it)"
    bad=$((bad + 1))
  fi
done
echo "format: $(( ${#files[@]} - bad )) of ${#files[@]} files as .clang-format says ($(clang-format --version | grep -o 'version [0-9.]*'))"
[ "$bad" -eq 0 ]
