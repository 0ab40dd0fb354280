"""What the two reference generators share (docs_c_api.py, docs_python_api.py): the
command line, the errors, and writing or checking the committed file."""
import pathlib
import sys


def run(argv, name, default, build, source):
    """Writes build()'s text to the target (argv[0], else `default`), or with --check
    fails when the committed one differs; fails naming each problem build() found.
    `source` says what the text is made from, for the out-of-date message."""
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    target = pathlib.Path(args[0]) if args else default
    text, problems = build()
    for problem in problems:
        print(f"{name}: {problem}", file=sys.stderr)
    if problems:
        return 1
    if check:
        if not target.exists() or target.read_text() != text:
            print(f"{name}: {target} is out of date with {source}: run make docs", file=sys.stderr)
            return 1
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return 0
