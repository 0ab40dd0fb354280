#!/usr/bin/env python3
"""Checks that no function of the C++ library (lib/, capi/, cuda/, opencl/) is longer
than LIMIT lines, from its opening brace to its closing one, but for those listed in
LONGER, which may not grow past the length given there. A long function is usually
several ideas: give each phase a name (lib/run/batch.cpp's to_device_many is six).
Prints each one too long; exits 1 if any.

usage: check_function_length.py   (from anywhere)
"""
import pathlib
import re
import sys

from check_report import report

ROOT = pathlib.Path(__file__).resolve().parents[1]
LIMIT = 100
# Still longer, each at most this long: (file, the line its name ends on, stripped).
LONGER = {}
KEYWORD_BLOCK = re.compile(r"\b(namespace|class|struct|enum|union|extern)\b")
STATEMENT = re.compile(r"^(if|for|while|switch|catch|do|else|try)\b")
SIGNATURE_END = re.compile(r"\)\s*(const|noexcept|override|final|\s)*(->[^{]*)?$")


def code_of(line):
    """The line without its strings, characters and // comment."""
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    return line.split("//")[0]


def functions(path):
    """(first line, last line, signature's last line) of each function body in `path`;
    lambdas and blocks inside a function count as part of it."""
    stack = []  # per open brace: (is a function, its line, the text before it)
    head = ""
    lines = path.read_text().split("\n")
    for number, line in enumerate(lines, 1):
        for ch in code_of(line):
            if ch == "{":
                text = head.strip()
                last = text.split("\n")[-1].strip()
                is_function = (not any(entry[0] for entry in stack) and SIGNATURE_END.search(text) is not None
                               and not KEYWORD_BLOCK.search(text.split("(")[0]) and not STATEMENT.match(last))
                stack.append((is_function, number, last))
                head = ""
            elif ch == "}":
                if stack:
                    is_function, first, last = stack.pop()
                    if is_function:
                        yield first, number, lines[first - 1].strip()
                head = ""
            elif ch == ";":
                head = ""
            else:
                head += ch
        head += "\n"


def main():
    too_long = []
    for top in ("lib", "capi", "cuda", "opencl"):
        for path in sorted((ROOT / top).rglob("*.[ch]pp")):
            name = str(path.relative_to(ROOT))
            for first, last, signature in functions(path):
                length = last - first + 1
                if length > LONGER.get((name, signature), LIMIT):
                    too_long.append(f"{name}:{first}: {length} lines, more than "
                                    f"{LONGER.get((name, signature), LIMIT)}")
    return report("check_function_length", too_long, "too long",
                  f"no function over {LIMIT} lines" + (f" but the {len(LONGER)} listed" if LONGER else ""))

if __name__ == "__main__":
    sys.exit(main())
