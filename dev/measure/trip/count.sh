#!/usr/bin/env bash
# How many files one transfer's trip crosses (#62): builds the library at -O0 in
# BUILD (default /tmp/trip-build), steps with gdb through one host -> opencl:0
# abr_to_device (one_transfer.c, the second of two calls) and counts stops (a change
# of file), files, and returns to a file already left: over every project file
# (headers too) and over the .cpp files alone. Run from any checkout, to compare two.
#   dev/measure/trip/count.sh [BUILD]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
build=${1:-/tmp/trip-build}
make -s -C "$root" BUILD="$build" OPT="-O0 -g" CUDA=0 lib >/dev/null 2>&1
gcc -g -O0 -I"$root/include" "$here/one_transfer.c" -o "$build/one_transfer" -L"$build/lib" -larraybridge \
  -Wl,-rpath,"$build/lib"
TRIP_ROOT=$root gdb -q -batch -x "$here/steps.py" "$build/one_transfer" 2>/dev/null | sed -n 's/^TRAIL //p' |
  python3 -c '
import sys
def count(trail):
    stops = [f for i, f in enumerate(trail) if i == 0 or trail[i - 1] != f]
    return len(stops), len(set(stops)), len(stops) - len(set(stops))
trail = sys.stdin.read().split()
print("every project file: %d stops in %d files, %d returns to a file already left" % count(trail))
print(".cpp files only:    %d stops in %d files, %d returns to a file already left"
      % count([f for f in trail if f.endswith(".cpp")]))'
