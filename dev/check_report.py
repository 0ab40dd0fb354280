"""How the tree's checks (check_walls.py, check_function_length.py) end: each problem on
stderr, then one line, and the exit status."""
import sys


def report(tool, problems, found, fine):
    """Prints `problems` as "tool: problem", then "tool: found: N" or "tool: fine";
    returns the exit status (1 if any problem)."""
    for problem in problems:
        print(f"{tool}: {problem}", file=sys.stderr)
    print(f"{tool}: {f'{found}: {len(problems)}' if problems else fine}")
    return 1 if problems else 0
