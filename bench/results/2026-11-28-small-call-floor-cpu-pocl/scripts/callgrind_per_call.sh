#!/bin/bash
# Instructions one warm 4 KiB abr_copy / abr_to_device costs on the fake CUDA driver,
# split into the library's own and the driver's entry points (callgrind: runs of
# 100 and 1100 calls, the difference / 1000). PUSH=1 makes the primary context
# current first, as a framework leaves its thread.
#   callgrind_per_call.sh REPO_BUILD_DIR   (e.g. /work/main/build or /tmp/before/build)
set -e
build=$1; here=$(cd "$(dirname "$0")" && pwd); out=$(mktemp -d)
g++ -O2 -g -I"$build/../include" -I/usr/local/cuda/include "$here/onecall.cpp" -L"$build/lib" -larraybridge -ldl \
  -Wl,-rpath,"$build/lib" -o "$out/onecall"
export ARRAYBRIDGE_CUDA_LIBRARY=$build/fake-cuda/libcuda.so.1
for mode in h2d d2h d2d; do
  for n in 100 1100; do
    valgrind --tool=callgrind --callgrind-out-file="$out/cg.$mode.$n" "$out/onecall" $mode $n 2>/dev/null
    callgrind_annotate --threshold=100 --inclusive=yes --tree=none "$out/cg.$mode.$n" > "$out/inc.$mode.$n" 2>/dev/null
  done
  python3 - "$out/inc.$mode.100" "$out/inc.$mode.1100" $mode <<'PY'
import re, sys
def load(path):
    d = {}
    for line in open(path):
        m = re.match(r'\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)', line)
        if m and '=>' not in line:
            d[m.group(2).strip()] = d.get(m.group(2).strip(), 0) + int(m.group(1).replace(',', ''))
    call = sum(v for k, v in d.items() if 'capi/transfer.cpp:abr_copy [' in k)
    driver = sum(v for k, v in d.items() if re.search(r'fake_driver.cpp:cu[A-Z]\w*(_v2)? \[', k))
    return call, driver
(a1, a2), (b1, b2) = load(sys.argv[1]), load(sys.argv[2])
print(f"{sys.argv[3]}: abr_copy {(b1 - a1) / 1000:6.0f}  in the driver {(b2 - a2) / 1000:6.0f}  "
      f"the library's own {(b1 - a1 - b2 + a2) / 1000:5.0f} instructions a call")
PY
done
rm -rf "$out"
