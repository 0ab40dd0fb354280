#!/bin/bash
# The 4 KiB and 64 KiB rows again, 50 repetitions each, three alternating rounds:
# the --quick runs' 5 repetitions leave these rows within this machine's noise.
OUTD=${1:?usage: run_small_sizes.sh OUTDIR}
cases=("host copy" "existing buffer" "batch" "copy_many" "to_device new buffer")
for r in 1 2 3; do
  for i in "${!cases[@]}"; do
    c=$((i+1))
    PYTHONPATH=/tmp/oldpy LD_LIBRARY_PATH=/tmp/before/build/lib /tmp/before/build/bin/arraybridge-bench --sizes 4K,64K --reps 50 --case "${cases[$i]}" --json $OUTD/before-r$r-c$c.json > /dev/null 2>&1
    (cd /work/main && ./build/bin/arraybridge-bench --sizes 4K,64K --reps 50 --case "${cases[$i]}" --json $OUTD/after-r$r-c$c.json > /dev/null 2>&1)
  done
done
echo finished
