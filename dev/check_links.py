#!/usr/bin/env python3
"""Checks the links of the project's Markdown files: every relative link names a file or
folder that exists inside the repository, and every #anchor a heading of its target
(GitHub's slugs); and every path the text names from a top folder (`lib/plan/planner.hpp`,
tests/python/...) exists, so that no doc names a file that is gone. Links to the web
are not followed (CI reaches no site), only listed with --web.

usage: check_links.py [--web]   (from anywhere; prints each broken link, exits 1 if any)
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
SKIP = {".git", ".venv", "build", "dist", "node_modules", "target"}
LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.S)
TOP = ("lib", "cuda", "opencl", "capi", "python", "tests", "tools", "dev", "bench", "docs", "include", "rust", "julia")
# A path from a top folder, as prose and code spans name one; not a pattern or a placeholder.
PATH = re.compile(r"(?<![\w./-])((?:" + "|".join(TOP) + r")/[\w./+-]*[\w/])")


def markdown_files():
    for path in ROOT.rglob("*.md"):
        if not SKIP.intersection(path.relative_to(ROOT).parts):
            yield path


def slugs(path):
    """GitHub's anchors for a file's headings."""
    found, seen = set(), {}
    text = CODE.sub("", path.read_text(errors="replace")) if path.suffix == ".md" else ""
    for line in text.splitlines():
        heading = re.match(r"#{1,6}\s+(.*)", line)
        if not heading:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def main(argv):
    broken, web = [], []
    for path in markdown_files():
        text = CODE.sub("", path.read_text(errors="replace"))
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):
                web.append(f"{path.relative_to(ROOT)}: {target}")
                continue
            file_part, _, anchor = target.partition("#")
            resolved = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(ROOT)}: ({target})"
            if not resolved.exists():
                broken.append(f"{where}: no such file or folder")
            elif ROOT not in resolved.parents and resolved != ROOT:
                broken.append(f"{where}: outside the repository (a fresh clone has no such file)")
            elif anchor and resolved.is_file() and resolved.suffix == ".md" and anchor not in slugs(resolved):
                broken.append(f"{where}: no heading #{anchor} in {resolved.relative_to(ROOT)}")
        for named in PATH.findall(re.sub(r"```.*?```", "", path.read_text(errors="replace"), flags=re.S)):
            if any(mark in named for mark in "*<>{}") or re.search(r"\b(DATE|GPU|NAME|FOLDER|FILE|KIND|COMMIT|MACHINE)\b", named):
                continue  # a pattern or a placeholder (bench/results/DATE-gpu-check-GPU)
            stem = ROOT / named.rstrip("/.")
            if not stem.exists() and not list(stem.parent.glob(stem.name + ".*")):  # lib/planner: its .hpp and .cpp
                broken.append(f"{path.relative_to(ROOT)}: names {named}, which does not exist")
    for line in broken:
        print(f"check_links: {line}", file=sys.stderr)
    if "--web" in argv:
        print("\n".join(web))
    print(f"check_links: {'broken: ' + str(len(broken)) if broken else 'all relative links resolve'} "
          f"({len(web)} web links not followed)")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
