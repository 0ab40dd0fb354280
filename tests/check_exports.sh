#!/usr/bin/env bash
# The library must export abr_* functions and nothing else: no C++ symbols, no
# spdlog or fmt, no DLPack helpers. Fails listing whatever else leaked out.
set -euo pipefail
lib=${1:?usage: check_exports.sh LIBRARY}
symbols=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sed 's/@.*//' | sort -u)
count=$(printf '%s\n' "$symbols" | grep -c '^abr_' || true)
others=$(printf '%s\n' "$symbols" | grep -v '^abr_' | grep -v '^ARRAYBRIDGE_' || true)
if [ -n "$others" ]; then
  echo "FAIL: $lib exports symbols outside abr_*:"; printf '  %s\n' $others; exit 1
fi
[ "$count" -gt 0 ] || { echo "FAIL: $lib exports no abr_* symbols"; exit 1; }
echo "exports: $count abr_* symbols and nothing else"
