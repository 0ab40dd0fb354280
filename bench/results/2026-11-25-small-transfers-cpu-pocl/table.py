"""Prints the before/after table of README.md from the JSON files beside it: per
case and size, the ratio to its baseline, the median over the runs of each kind."""
import json
import pathlib
import statistics

HERE = pathlib.Path(__file__).parent
CASES = ["host copy", "to_device new buffer", "transpose pack", "step-2 slice pack", "negative-stride pack",
         "H2D existing buffer", "D2H existing buffer", "H2D new buffer"]
SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20]
OPENCL_BASELINE = {"H2D existing buffer": "clWrite", "D2H existing buffer": "clRead", "H2D new buffer": "clCreate"}


def ratios(pattern):
    out = {}
    for path in sorted(HERE.glob(pattern)):
        for r in json.loads(path.read_text())["results"]:
            label = OPENCL_BASELINE.get(r["case"], r["baselines"][0]["label"] if r["baselines"] else None)
            for b in r["baselines"]:
                if b["label"] == label and b.get("ratio"):
                    out.setdefault((r["case"], r["size_bytes"]), []).append(b["ratio"])
    return {k: statistics.median(v) for k, v in out.items()}


before, after = ratios("before-*.json"), ratios("after-[0-9].json")
print("| case | baseline | " + " | ".join(f"{s >> 20} MiB" if s >= 1 << 20 else f"{s >> 10} KiB" for s in SIZES) + " |")
print("|---|---|" + "---|" * len(SIZES))
for case in CASES:
    cells = [f"{before[(case, s)]:.2g} → **{after[(case, s)]:.2g}**" if (case, s) in before and (case, s) in after
             else "-" for s in SIZES]
    print(f"| {case} | {OPENCL_BASELINE.get(case, 'memcpy' if 'pack' in case or case == 'host copy' else 'malloc+cp')} | "
          + " | ".join(cells) + " |")
