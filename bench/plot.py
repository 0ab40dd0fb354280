#!/usr/bin/env python3
"""Plots arraybridge-bench --json output: one panel per case and device, libarraybridge
beside each baseline of the same run: bandwidth against size, or, for per-call costs,
nanoseconds against size (a bar per measurement for costs measured once).

usage: bench/plot.py RESULTS.json OUT.png [--title TEXT]
(make's setup installs matplotlib into .venv: .venv/bin/python bench/plot.py ...)
"""
import argparse
import json
import math
import sys
from collections import OrderedDict


def size_of(r):
    return r.get("size_bytes") or r.get("bytes") or 0


def panels(results):
    """Results grouped by (case, device), sizes ascending."""
    grouped = OrderedDict()
    for r in results:
        if r.get("unit") == "GB/s" and not r.get("bytes"):
            continue
        grouped.setdefault((r["case"], r["device"]), []).append(r)
    for rows in grouped.values():
        rows.sort(key=size_of)
    return grouped


def value(entry, seconds):
    """What the panel plots for one time: GB/s, or ns per call."""
    if entry.get("unit") == "ns":
        return seconds * 1e9
    return entry["bytes"] / seconds / 1e9


def load(path):
    """The JSON's results, or exits with one line saying what is wrong with the file."""
    try:
        with open(path) as f:
            data = json.load(f)
        results = data["results"]
        for r in results:
            r["case"], r["device"], r["seconds"], r["baselines"]  # every field a panel needs
    except OSError as error:
        sys.exit(f"bench/plot.py: cannot read {path}: {error.strerror}")
    except json.JSONDecodeError as error:
        sys.exit(f"bench/plot.py: {path} is not JSON ({error.msg} at line {error.lineno}); "
                 "expected the output of arraybridge-bench --json")
    except (KeyError, TypeError) as error:
        sys.exit(f"bench/plot.py: {path} is not arraybridge-bench --json output (no {error} field)")
    return data


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results")
    parser.add_argument("out")
    parser.add_argument("--title", default=None)
    args = parser.parse_args(argv)
    try:
        import matplotlib
    except ImportError:
        sys.exit("bench/plot.py: matplotlib is not installed; run dev/setup_python.sh and use .venv/bin/python")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = load(args.results)
    grouped = panels(data["results"])
    if not grouped:
        sys.exit("bench/plot.py: no results in " + args.results)
    columns = min(3, len(grouped))
    rows = math.ceil(len(grouped) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.2 * columns, 3.6 * rows), squeeze=False)
    for ax, ((case, device), entries) in zip(axes.flat, grouped.items()):
        unit = "ns per call" if entries[0].get("unit") == "ns" else "GB/s"
        names = OrderedDict((b["name"], None) for e in entries for b in e["baselines"] if "seconds" in b)
        if not size_of(entries[0]):  # measured once: bars
            bars = [("libarraybridge", value(entries[0], entries[0]["seconds"]))]
            bars += [(b["name"], value(entries[0], b["seconds"])) for b in entries[0]["baselines"] if "seconds" in b]
            ax.bar(range(len(bars)), [b[1] for b in bars], color=["C0"] + ["C1"] * (len(bars) - 1))
            ax.set_xticks(range(len(bars)), [b[0] for b in bars], fontsize=7)
        else:
            sizes = [size_of(e) / 2**20 for e in entries]
            ax.plot(sizes, [value(e, e["seconds"]) for e in entries], "o-", linewidth=2, label="libarraybridge")
            for name in names:
                points = [(size_of(e) / 2**20, value(e, b["seconds"]))
                          for e in entries for b in e["baselines"] if b["name"] == name and "seconds" in b]
                ax.plot([p[0] for p in points], [p[1] for p in points], "s--", linewidth=1, label=name)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("MiB")
            ax.legend(fontsize=7)
        ax.set_title(f"{case}\n[{device}]", fontsize=9)
        ax.set_ylabel(unit)
        ax.grid(True, alpha=0.3)
    for ax in list(axes.flat)[len(grouped):]:
        ax.axis("off")
    title = args.title or "arraybridge-bench {} ({} repetitions, median)".format(
        data.get("library_version", "?"), data.get("repetitions", "?"))
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(args.out, dpi=90)
    print(f"bench/plot.py: wrote {args.out} ({len(grouped)} panels)")


if __name__ == "__main__":
    main(sys.argv[1:])
