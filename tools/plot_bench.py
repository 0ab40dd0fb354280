#!/usr/bin/env python3
"""Plots arraybridge-bench --json output: bandwidth against size, one panel per
case and device, libarraybridge beside each baseline of the same run.

usage: plot_bench.py RESULTS.json OUT.png [--title TEXT]
(make's setup installs matplotlib into .venv: .venv/bin/python tools/plot_bench.py ...)
"""
import argparse
import json
import math
import sys
from collections import OrderedDict


def panels(results):
    """Bandwidth cases grouped by (case, device), sizes ascending."""
    grouped = OrderedDict()
    for r in results:
        if r.get("unit") != "GB/s" or not r.get("bytes"):
            continue  # per-call costs (ns) have no bandwidth to plot
        grouped.setdefault((r["case"], r["device"]), []).append(r)
    for rows in grouped.values():
        rows.sort(key=lambda r: r["bytes"])
    return grouped


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results")
    parser.add_argument("out")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv)
    try:
        import matplotlib
    except ImportError:
        sys.exit("plot_bench: matplotlib is not installed; run tools/setup_python.sh and use .venv/bin/python")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(args.results) as f:
        data = json.load(f)
    grouped = panels(data["results"])
    if not grouped:
        sys.exit("plot_bench: no bandwidth results in " + args.results)
    columns = min(3, len(grouped))
    rows = math.ceil(len(grouped) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 3.6 * rows), squeeze=False)
    for ax, ((case, device), entries) in zip(axes.flat, grouped.items()):
        sizes = [e["bytes"] / 2**20 for e in entries]
        ax.plot(sizes, [e["gbps"] for e in entries], "o-", linewidth=2, label="libarraybridge")
        names = OrderedDict((b["name"], None) for e in entries for b in e["baselines"] if "seconds" in b)
        for name in names:
            points = [(e["bytes"] / 2**20, e["bytes"] / b["seconds"] / 1e9)
                      for e in entries for b in e["baselines"] if b["name"] == name and "seconds" in b]
            ax.plot([p[0] for p in points], [p[1] for p in points], "s--", linewidth=1, label=name)
        ax.set_xscale("log", base=2)
        ax.set_title(f"{case}\n[{device}]", fontsize=9)
        ax.set_xlabel("MiB")
        ax.set_ylabel("GB/s")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(grouped):]:
        ax.axis("off")
    title = args.title or "arraybridge-bench {} ({} repetitions, median)".format(
        data.get("library_version", "?"), data.get("repetitions", "?"))
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(args.out, dpi=90)
    print(f"plot_bench: wrote {args.out} ({len(grouped)} panels)")


if __name__ == "__main__":
    main(sys.argv[1:])
