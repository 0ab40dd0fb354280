#!/usr/bin/env python3
"""Checks the walls between lib/'s wings (lib/README.md): a file of a wing includes
only from its own wing and the wings below it; the backends (cuda/, opencl/) only
from base to memory and host, never the planner or the runtime; but for the climbs
listed below, each with its reason. Prints each breach; exits 1 if any.

usage: check_walls.py   (from anywhere)
"""
import pathlib
import re
import sys

from check_report import report

ROOT = pathlib.Path(__file__).resolve().parents[1]
ORDER = ["base", "platform", "tensor", "devices", "memory", "host", "plan", "run"]
BACKEND_MAY = {"base", "platform", "tensor", "devices", "memory", "host"}
# The climbs still allowed, each with its reason: (file, wing it reaches).
CLIMBS = {("lib/devices/backend.cpp", "plan"): "the default peer copy reads a Plan",
          ("cuda/peer_copy.hpp", "plan"): "the CUDA peer copy composes pack, peer and scatter from a Plan"}
INCLUDE = re.compile(r'#include "lib/([a-z_]+)/')


def main():
    breaches = []
    for path in sorted(ROOT.glob("lib/*/*.[ch]pp")) + sorted(ROOT.glob("cuda/*.[ch]pp")) + \
            sorted(ROOT.glob("opencl/*.[ch]pp")):
        name = str(path.relative_to(ROOT))
        top, wing = path.parts[len(ROOT.parts)], path.parts[len(ROOT.parts) + 1]
        allowed = set(ORDER[:ORDER.index(wing) + 1]) if top == "lib" else BACKEND_MAY
        if top == "lib" and wing not in ORDER:
            breaches.append(f"{name}: lib/{wing} is no wing of lib/README.md")
            continue
        for reached in INCLUDE.findall(path.read_text()):
            if reached not in ORDER:
                breaches.append(f"{name}: includes from lib/{reached}, which is no wing")
            elif reached not in allowed and (name, reached) not in CLIMBS:
                breaches.append(f"{name}: includes from lib/{reached}, above what "
                                f"{'lib/' + wing if top == 'lib' else top + '/'} may include")
    return report("check_walls", breaches, "breaches", "every include within its walls")


if __name__ == "__main__":
    sys.exit(main())
