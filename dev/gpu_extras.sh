#!/usr/bin/env bash
# What the GPU sessions before this one left to measure, run after gpu-check on the
# same warm machine (dev/gpu_kit.sh run does, within its time), most wanted first, each
# step to its own file so that a step cut short by the time limit leaves the others:
#
#   batch-phases.txt
#                  dev/batch_phases.py: the py batch rows' call beside its pieces
#   py-batch-2.txt, py-state-2.txt
#                  the py batch and state dict rows again, for their spread
#   pageable-1.txt, pageable-2.txt
#                  the pageable rows at 16 MiB, 256 MiB and 1 GiB (and the thread
#                  sweeps at 1 GiB) twice: gpu-check's single run spread 39-50 GB/s
#                  at 1 GiB from one machine to the next
#   chunk-4.txt, chunk-8.txt
#                  the pageable rows from 4 to 256 MiB with 4 and 8 MiB staging chunks
#                  (ARRAYBRIDGE_STAGING_CHUNK_MIB): 11-27 read 16 MiB faster with 4
#
#   dev/gpu_extras.sh OUT_DIR      (BUILD and PYTHON as for gpu_check.sh)
set -u
cd "$(dirname "$0")/.."
out=${1:?usage: dev/gpu_extras.sh OUT_DIR}
build=${BUILD:-build}
python=${PYTHON:-python3}
bench=$build/bin/arraybridge-bench
mkdir -p "$out"
summary=$out/extras.txt
: > "$summary"
failed=0
source dev/steps.sh
step batch-phases "$python" dev/batch_phases.py
step py-batch-2 "$bench" --device cuda:0 --case "py batch" --sizes 4M --python "$python"
for round in 1 2; do
  step "pageable-$round" "$bench" --device cuda:0 --case pageable --sizes 16M,256M,1G --python "$python"
done
for mib in 4 8; do
  step "chunk-$mib" env ARRAYBRIDGE_STAGING_CHUNK_MIB=$mib "$bench" --device cuda:0 --case pageable \
    --sizes 4M,16M,64M,256M --python "$python"
done
step py-state-2 "$bench" --device cuda:0 --case "py state dict" --sizes 4M --python "$python"
[ $failed -eq 0 ]
