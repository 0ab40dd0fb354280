#!/bin/bash
# Instructions inside the package's call (core_to_device_many / core_to_device,
# everything they call included) per torch tensor: runs of 2 and 12 calls, the
# difference / 10 (/ 10000 for the 1000-tensor batch). Before: PYTHONPATH and
# LD_LIBRARY_PATH naming the older build, as run_before_after.sh does.
#   callgrind_torch.sh LABEL
set -e
here=$(cd "$(dirname "$0")" && pwd); out=$(mktemp -d)
export ARRAYBRIDGE_CUDA_LIBRARY=${ARRAYBRIDGE_CUDA_LIBRARY:-/work/main/build/fake-cuda/libcuda.so.1}
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
for kind in batch single; do
  fn=$([ $kind = batch ] && echo core_to_device_many || echo core_to_device)
  for n in 2 12; do
    valgrind --tool=callgrind --callgrind-out-file="$out/cg.$kind.$n" /work/main/.venv/bin/python "$here/torch_calls.py" $kind $n 2>/dev/null
    callgrind_annotate --threshold=100 --inclusive=yes "$out/cg.$kind.$n" 2>/dev/null |
      grep -E "_core/transfer.c:$fn \[" | head -1 | awk '{gsub(",","",$1); print $1}' > "$out/n.$kind.$n"
  done
  per=$([ $kind = batch ] && echo 10000 || echo 10)
  echo "$1 $kind: $(( ($(cat $out/n.$kind.12) - $(cat $out/n.$kind.2)) / per )) instructions in $fn a tensor"
done
rm -rf "$out"
