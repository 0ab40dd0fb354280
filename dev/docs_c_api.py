#!/usr/bin/env python3
"""Writes the C API reference (docs/reference/c-api.md) from include/arraybridge/arraybridge.h.

The header is the reference: its comments are written as prose for each function or
group of declarations, so this script only lays them out (as zstd's manual is made
from zstd.h): a section per "/* ---- name */" banner, each group's declarations as C
and its comment as text, and an index of every function. It fails, naming each, on a
function of capi/exports.txt that the header lacks or that has no comment in its group,
and with --check on a committed reference that differs from what it would write.

usage: docs_c_api.py [--check] [OUT]   (OUT defaults to docs/reference/c-api.md)
"""
import pathlib
import re
import sys

import docs_reference  # beside this file

ROOT = pathlib.Path(__file__).resolve().parents[1]
HEADER = ROOT / "include" / "arraybridge" / "arraybridge.h"
EXPORTS = ROOT / "capi" / "exports.txt"
BANNER = re.compile(r"^/\* -+ ([\w ,/]+) \*/$")
FUNCTION = re.compile(r"ABR_API\s+[\w\s\*]+?\b(abr_\w+)\s*\(")
# What a reader needs: declarations, types and the library's constants.
SHOWN = re.compile(r"^ABR_API\s+\w|^typedef|^struct |^#define (?!ABR_API\b)(ABR|DLPACK)_", re.M)


def strip_comment(lines):
    """The text of a /* ... */ block, as paragraphs of plain lines."""
    text = []
    for line in lines:
        line = line.strip()
        line = re.sub(r"^/\*+\s?", "", line)
        line = re.sub(r"\s*\*+/$", "", line)
        line = re.sub(r"^\*\s?", "", line)
        text.append(line)
    return "\n".join(text).strip()


def groups(lines):
    """(comment, code lines) pairs: a comment and the declarations up to the next blank line or comment."""
    comment, code, in_comment, pending = [], [], False, []
    for line in lines:
        stripped = line.strip()
        if in_comment:
            pending.append(line)
            if "*/" in stripped:
                in_comment = False
                if code:
                    yield comment, code
                    comment, code = [], []
                comment = pending
                pending = []
            continue
        if stripped.startswith("/*") and not code:
            pending = [line]
            if "*/" in stripped:
                comment, pending = pending, []
            else:
                in_comment = True
            continue
        if stripped.startswith("/*") and code:
            yield comment, code
            comment, code, pending = [], [], [line]
            if "*/" in stripped:
                comment, pending = pending, []
            else:
                in_comment = True
            continue
        if not stripped or stripped.startswith("#if") or stripped.startswith("#endif") or stripped.startswith("#pragma"):
            if code:
                yield comment, code
                comment, code = [], []
            elif not stripped:
                comment = []
            continue
        code.append(line.rstrip())
    if code:
        yield comment, code


def build():
    text = HEADER.read_text()
    sections, name, body = [], "Versions and the ABI", []
    for line in text.splitlines():
        banner = BANNER.match(line.strip())
        if banner:
            sections.append((name, body))
            name, body = banner.group(1).strip().capitalize(), []
        else:
            body.append(line)
    sections.append((name, body))

    out, index, problems = [], {}, []
    for title, body in sections:
        if not body or title.lower().startswith("versions") and not any("ABR_API" in b for b in body):
            pass
        blocks = []
        said = " ".join(strip_comment(c) for c, _ in groups(body))  # what the section's comments name
        for comment, code in groups(body):
            joined = "\n".join(code)
            prose = strip_comment(comment)
            if not SHOWN.search(joined):  # include guards, linkage, the ABR_API macro: plumbing
                if prose:
                    blocks.append((prose, ""))
                continue
            names = FUNCTION.findall(joined)
            for function in names:
                index[function] = title
                if not prose and not re.search(rf"\b{function}\b", said):
                    problems.append(f"{function} has no comment above its group, and no comment of its section "
                                    f"names it, in {HEADER.name}")
            blocks.append((prose, joined))
        if not blocks:
            continue
        out.append(f"## {title}\n")
        for prose, code in blocks:
            if code:
                out.append("```c\n" + code + "\n```\n")
            if prose:
                out.append(prose + "\n")
    exported = EXPORTS.read_text().split()
    for function in exported:
        if function not in index:
            problems.append(f"{function} is exported (capi/exports.txt) but not declared with ABR_API in {HEADER.name}")
    anchors = {title: re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-") for title in set(index.values())}
    lines = ["# The C API\n",
             "Generated by `dev/docs_c_api.py` from `include/arraybridge/arraybridge.h` (`make docs`);",
             "edit the header's comments, not this file. The conventions (statuses, ownership, versioned",
             "structs, thread safety) are in the header's first comment, below.\n",
             "| function | section |", "|---|---|"]
    lines += [f"| `{f}` | [{index[f]}](#{anchors[index[f]]}) |" for f in sorted(index)]
    lines.append("")
    return "\n".join(lines) + "\n" + "\n".join(out), problems


def main(argv):
    return docs_reference.run(argv, "docs_c_api", ROOT / "docs" / "reference" / "c-api.md", build, "the header")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
