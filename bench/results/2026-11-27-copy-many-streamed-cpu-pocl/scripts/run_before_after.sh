#!/bin/bash
# before/after, alternating rounds
OUTD=${1:-/work/main/bench/results/2026-11-27-copy-many-streamed-cpu-pocl}  # where the JSON files go
# CASES (comma-separated) picks other cases, e.g. CASES="py pass,py batch"
IFS=, read -r -a cases <<< "${CASES:-host copy,to_device new buffer,existing buffer,batch,copy_many,py copy,py many small}"
for r in 1 2; do
  for i in "${!cases[@]}"; do
    c=$((i+1))
    PYTHONPATH=/tmp/oldpy LD_LIBRARY_PATH=/tmp/before/build/lib /tmp/before/build/bin/arraybridge-bench --quick --case "${cases[$i]}" --python /work/main/.venv/bin/python --json $OUTD/before-r$r-c$c.json > /dev/null 2>&1
    (cd /work/main && ./build/bin/arraybridge-bench --quick --case "${cases[$i]}" --json $OUTD/after-r$r-c$c.json > /dev/null 2>&1)
  done
done
echo finished
