"""Runs Python tests under valgrind memcheck and fails on any leak or memory error
whose stack passes through arraybridge's native code (libarraybridge, _core,
_native). CPython, NumPy and the loader have findings of their own under
valgrind; those are counted, not judged.

    python tests/python/valgrind_native.py [pytest arguments]
"""
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# A frame in our code: a source file of the repository's native layers (memcheck
# prints full paths with --fullpath-after=), or our objects when there is no line.
OURS = re.compile(rf"\({re.escape(ROOT)}/(lib|capi|cuda|opencl|python)/|libarraybridge\.so|/arraybridge/_(core|native)\.")
RECORD_START = re.compile(r"^==\d+== (Invalid|Use of uninitialised|Conditional jump|Mismatched|Syscall param|"
                          r"Source and destination overlap|\S.* bytes in \S+ blocks are (definitely|indirectly) lost)")


def records(log):
    """The error and leak records of a memcheck log, each as its lines."""
    current = None
    for line in log.splitlines():
        if RECORD_START.match(line):
            current = [line]
            yield current
        elif current is not None and re.match(r"^==\d+== +(at|by) 0x", line):
            current.append(line)
        else:
            current = None


def is_ours(record):
    """Whether our code caused the finding: our frame near the top of its stack.
    Deeper frames do not count, since every Python-level finding (CPython's own
    uninitialised-digit reports, a module's one-off leak at import) has some of
    our functions further down."""
    frames = record[1:]
    if "lost" in record[0]:  # the allocator, then who asked for the memory (through CPython's allocators)
        frames = [f for f in frames if not re.search(r"\b(malloc|calloc|realloc|operator new)", f)][:6]
    elif "uninitialised" in record[0]:  # where the value was used
        frames = frames[:1]
    else:  # invalid or overlapping access: allow for memcpy and friends on top
        frames = frames[:3]
    return any(OURS.search(f) for f in frames)


def main(pytest_args):
    with tempfile.TemporaryDirectory() as tmp:
        log_path = os.path.join(tmp, "memcheck.log")
        env = dict(os.environ, PYTHONMALLOC="malloc")  # every object through malloc, so memcheck sees it
        command = ["valgrind", "--tool=memcheck", "--leak-check=full", "--show-leak-kinds=definite,indirect",
                   "--num-callers=40", "--fullpath-after=", f"--log-file={log_path}", sys.executable, "-m", "pytest", "-q",
                   "-p", "no:cacheprovider", *pytest_args]
        tests = subprocess.run(command, env=env)
        with open(log_path) as log_file:
            log = log_file.read()
    found = list(records(log))
    ours = [r for r in found if is_ours(r)]
    for record in ours:
        print("\n".join(record), file=sys.stderr)
    print(f"valgrind: {len(ours)} finding(s) in arraybridge's native code; {len(found) - len(ours)} elsewhere "
          "(CPython, NumPy, the loader), not judged")
    if "ERROR SUMMARY" not in log:
        print("valgrind: memcheck did not finish", file=sys.stderr)
        return 1
    return 1 if ours or tests.returncode else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
