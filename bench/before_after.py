"""The before/after table of a bench/results folder whose runs are named
before-*.json and after-*.json: each row's ratio against each baseline, one
figure per run. python3 bench/before_after.py bench/results/FOLDER"""
import collections
import glob
import json
import os
import sys

here = sys.argv[1] if len(sys.argv) > 1 else "."
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for path in sorted(glob.glob(os.path.join(here, "before-*.json")) + glob.glob(os.path.join(here, "after-*.json"))):
    when = "before" if os.path.basename(path).startswith("before-") else "after"
    for r in json.load(open(path))["results"]:
        size = r.get("size_bytes") or r["bytes"]
        for b in r["baselines"]:
            if b.get("seconds") and r.get("seconds"):
                rows[(r["case"], size, b["label"])][when].append(b["seconds"] / r["seconds"])


def figures(ratios):
    return ", ".join(f"{x:.2f}" if x >= 0.1 else f"{x:.3f}" for x in ratios)


print("| row / baseline | size | before | after |\n|---|---|---|---|")
for (case, size, label), runs in sorted(rows.items()):
    text = f"{size >> 10} KiB" if size < (1 << 20) else f"{size >> 20} MiB"
    print(f"| {case} / {label} | {text} | {figures(runs['before'])} | {figures(runs['after'])} |")
