#!/usr/bin/env python3
"""Checks the walls between lib/'s wings (lib/README.md): a file of a wing includes
only from its own wing and the wings below it; the backends (cuda/, opencl/) only
from base to memory and host, never the planner or the runtime. And a backend lives
in its folder: no code of
lib/, capi/ or the Python package names a backend's device types, its abr_backend
value or its disable flag (they ask the kind table), but for the files listed
below. And a backend's Capabilities (what it can do, which decides a transfer's
path) are read by the planner alone (lib/plan): code elsewhere in lib/ and capi/
carries out what the plan says. Prints each breach; exits 1 if any.

usage: check_walls.py   (from anywhere)
"""
import pathlib
import re
import sys

from check_report import report

ROOT = pathlib.Path(__file__).resolve().parents[1]
ORDER = ["base", "platform", "tensor", "devices", "memory", "host", "plan", "run"]
BACKEND_MAY = {"base", "platform", "tensor", "devices", "memory", "host"}
INCLUDE = re.compile(r'#include "lib/([a-z_]+)/')
BACKEND_NAME = re.compile(r"\b(kDL(CUDA|CUDAHost|CUDAManaged|OpenCL|ROCM|ROCMHost|Vulkan|Metal|OneAPI)|"
                          r"ABR_BACKEND_(CUDA|OPENCL)|ABR_RUNTIME_DISABLE_\w+|DLDeviceType\.(?!CPU\b)[A-Z_]+)\b")
# Where naming them is the file's job, each with its reason.
NAMES_ALLOWED = {"lib/tensor/device_kinds.hpp": "the device-kind table: DLPack's own list of the device types it defines",
                 "python/native_build.py": "cffi's declaration of the C header"}
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/|#[^\n]*|\"\"\".*?\"\"\"", re.S)


def backend_names():
    """Code (comments and docstrings aside) outside the backends that names a backend."""
    files = [p for pattern in ("lib/*/*.[ch]pp", "capi/*.[ch]pp", "python/*.py", "python/arraybridge/**/*.py",
                               "python/arraybridge/_core/*.[ch]") for p in ROOT.glob(pattern)]
    found = []
    for path in sorted(files):
        name = str(path.relative_to(ROOT))
        text = path.read_text()
        # C's #include and Python's comments both start with '#': neither names a backend here.
        for match in BACKEND_NAME.finditer(COMMENT.sub("", text)):
            if name not in NAMES_ALLOWED:
                found.append(f"{name}: names {match.group(0)}; ask the kind table (abr_device_kind_get) instead")
    return found


CAPABILITY_READ = re.compile(r"\bcan\.\w+")  # an Endpoint's field (the runtime fills it from capabilities())


def capability_reads():
    """Code outside lib/plan (and the backends, which define theirs) that reads a backend's Capabilities."""
    found = []
    for path in sorted(ROOT.glob("lib/*/*.[ch]pp")) + sorted(ROOT.glob("capi/*.[ch]pp")):
        name = str(path.relative_to(ROOT))
        if name.startswith("lib/plan/") or name in CAPABILITIES_ALLOWED:
            continue
        for match in CAPABILITY_READ.finditer(COMMENT.sub("", path.read_text())):
            found.append(f"{name}: reads {match.group(0)}; the planner decides from capabilities (lib/plan)")
    return found


# Where a capability is read outside the planner, each with its reason.
CAPABILITIES_ALLOWED = {"lib/devices/backend.hpp": "declares them"}


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
            elif reached not in allowed:
                breaches.append(f"{name}: includes from lib/{reached}, above what "
                                f"{'lib/' + wing if top == 'lib' else top + '/'} may include")
    breaches += backend_names()
    breaches += capability_reads()
    return report("check_walls", breaches, "breaches",
                  "every include within its walls, no backend named outside its folder, and capabilities read by "
                  "the planner alone")


if __name__ == "__main__":
    sys.exit(main())
