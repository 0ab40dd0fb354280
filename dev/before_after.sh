#!/usr/bin/env bash
# A before/after bench of a change: builds COMMIT (default: HEAD) in a worktree of its
# own (/tmp/before), then alternates rounds of the bench of that build and of this
# tree's build, writing before-N.json and after-N.json into OUT for
# bench/before_after.py. Run it with nothing else on the machine (2 cores).
#   dev/before_after.sh OUT [COMMIT] [ROUNDS]    CASE="py conv" narrows the cases
set -euo pipefail
out=${1:?usage: dev/before_after.sh OUT [COMMIT] [ROUNDS]}
commit=${2:-HEAD}
rounds=${3:-2}
here=$(cd "$(dirname "$0")/.." && pwd)
before=/tmp/before
mkdir -p "$out"
if [ "$(git -C "$before" rev-parse HEAD 2>/dev/null)" != "$(git -C "$here" rev-parse "$commit")" ]; then
  git -C "$here" worktree remove --force "$before" 2>/dev/null || rm -rf "$before"
  git -C "$here" worktree add -f "$before" "$commit"
fi
make -C "$before" -j2 BUILD="$before/build" all >/dev/null
# The before package beside the project's .venv: built in place, found first on PYTHONPATH.
(cd "$before/python" && ARRAYBRIDGE_BUILD="$before/build" "$here/.venv/bin/python" setup.py build_ext --inplace >/dev/null)
make -C "$here" -j2 all python >/dev/null
case_args=()
[ -n "${CASE:-}" ] && case_args=(--case "$CASE")
for round in $(seq "$rounds"); do
  (cd "$before" && PYTHONPATH="$before/python" build/bin/arraybridge-bench --quick "${case_args[@]}" \
     --python "$here/.venv/bin/python" --json "$out/before-$round.json" >/dev/null)
  (cd "$here" && build/bin/arraybridge-bench --quick "${case_args[@]}" --json "$out/after-$round.json" >/dev/null)
done
python3 "$here/bench/before_after.py" "$out"
