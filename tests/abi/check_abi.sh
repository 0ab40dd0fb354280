#!/usr/bin/env bash
# The ABI contract, checked on the built library:
#  - the public header compiles alone as C99 and as C++17 with warnings as errors;
#  - the library exports exactly the abr_* functions listed in capi/exports.txt
#    (an accidental addition or removal fails here: update the list on purpose);
#  - the soname and file name carry the header's ABR_VERSION_* numbers;
#  - the CUDA tools see the library's device code: cuobjdump (the toolkit's, or
#    the nvidia-cuda-cuobjdump wheel in .venv) lists sm_80 and sm_90 in it.
# Struct layouts are pinned by static asserts in tests/abi/test_abi_layout.cpp
# and rust/arraybridge/tests/layout.rs; abr_version_number() by tests/abi/abi_test.c.
set -euo pipefail
cd "$(dirname "$0")/../.."
lib=${1:?usage: check_abi.sh LIBRARY}
failed=0
fail() { echo "FAIL: $*"; failed=1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include <arraybridge/arraybridge.h>\nint main(void) { return abr_version_number() == ABR_VERSION_NUMBER ? 0 : 1; }\n' > "$tmp/h.c"
cp "$tmp/h.c" "$tmp/h.cpp"
${CC:-cc} -std=c99 -pedantic -Wall -Wextra -Werror -Iinclude -c "$tmp/h.c" -o "$tmp/h.o" || fail "the header does not compile as C99 with -Werror"
${CXX:-c++} -std=c++17 -pedantic -Wall -Wextra -Wshadow -Werror -Iinclude -c "$tmp/h.cpp" -o "$tmp/hpp.o" ||
  fail "the header does not compile as C++17 with -Werror"

exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sed 's/@.*//' | grep -v '^ARRAYBRIDGE_' | sort -u)
others=$(printf '%s\n' "$exported" | grep -v '^abr_' || true)
[ -z "$others" ] || fail "symbols outside abr_* are exported: $(echo $others)"
if ! diff_out=$(diff <(sort -u capi/exports.txt) <(printf '%s\n' "$exported")); then
  fail "exported symbols differ from capi/exports.txt ('<' listed but missing, '>' exported but not listed):"
  printf '%s\n' "$diff_out" | grep '^[<>]' | sed 's/^/  /'
fi

macro() { sed -n "s/^#define ABR_VERSION_$1 \([0-9]*\).*/\1/p" include/arraybridge/arraybridge.h; }
version="$(macro MAJOR).$(macro MINOR).$(macro PATCH)"
soname=$(objdump -p "$lib" | awk '/SONAME/ {print $2}')
# Before 1.0 the minor version is part of the soname: every 0.x may change the ABI.
expected=libarraybridge.so.$(macro MAJOR)
[ "$(macro MAJOR)" = 0 ] && expected=libarraybridge.so.0.$(macro MINOR)
[ "$soname" = "$expected" ] || fail "soname $soname is not $expected (from ABR_VERSION_MAJOR/MINOR)"
[ "$(basename "$lib")" = "libarraybridge.so.$version" ] || fail "$(basename "$lib") is not libarraybridge.so.$version"

cuobjdump=$(command -v cuobjdump || ls "${CUDA_HOME:-/usr/local/cuda}"/bin/cuobjdump .venv/lib/python3*/site-packages/nvidia/cu*/bin/cuobjdump 2>/dev/null | head -1 || true)
if [ -z "$cuobjdump" ]; then
  fail "no cuobjdump (CUDA Toolkit, or pip install nvidia-cuda-cuobjdump into .venv) to check the device code"
else
  elves=$("$cuobjdump" --list-elf "$lib" 2>&1 || true)
  for arch in sm_80 sm_90; do
    printf '%s\n' "$elves" | grep -q "\.$arch\.cubin" || fail "cuobjdump finds no $arch code in $lib: $elves"
  done
fi

[ $failed -eq 0 ] && echo "abi: header C99/C++17 clean, $(printf '%s\n' "$exported" | wc -l) exports as listed, soname $soname," \
  "device code for $(printf '%s\n' "$elves" | grep -o 'sm_[0-9]*' | sort -u | tr '\n' ' ')seen by cuobjdump"
exit $failed
