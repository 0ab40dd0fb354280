"""Runs Python tests under valgrind memcheck and fails on any leak or memory error
whose stack passes through arraybridge's native code (libarraybridge, _core,
_native). CPython, NumPy and the loader have findings of their own under
valgrind; those are counted, not judged.

    python tests/python/valgrind_native.py [--shards N] [pytest arguments]

With --shards N, N memcheck processes run at once, each its shard of the tests
(tests/python/shards.py): memcheck runs one thread at a time, so on CI's two cores
two shards take about half the time.
"""
import os
import re
import subprocess
import sys
import tempfile
import time

import shards

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


def main(argv):
    count = 1
    if argv[:1] == ["--shards"]:
        count, argv = int(argv[1]), argv[2:]
    start = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        logs = [os.path.join(tmp, f"memcheck-{k}.log") for k in range(count)]
        env = dict(os.environ, PYTHONMALLOC="malloc")  # every object through malloc, so memcheck sees it
        # Stacks of 16 frames, taken where memory is allocated and not again where it is
        # freed: is_ours reads six frames at most, and a stack at every malloc and free
        # is most of what importing a framework costs under memcheck.
        commands = [["valgrind", "--tool=memcheck", "--leak-check=full", "--show-leak-kinds=definite,indirect",
                     "--num-callers=16", "--keep-stacktraces=alloc", "--fullpath-after=", f"--log-file={log}",
                     sys.executable, "-m", "pytest",
                     "-q", "-p", "no:cacheprovider", *argv] for log in logs]
        envs = [shards.shard_env(k, count, env) if count > 1 else env for k in range(count)]
        results = shards.run(commands, envs)
        texts = []
        for log in logs:
            with open(log) as log_file:
                texts.append(log_file.read())
    shards.show(results, time.monotonic() - start)
    found = [record for text in texts for record in records(text)]
    ours = [r for r in found if is_ours(r)]
    for record in ours:
        print("\n".join(record), file=sys.stderr)
    print(f"valgrind: {len(ours)} finding(s) in arraybridge's native code; {len(found) - len(ours)} elsewhere "
          "(CPython, NumPy, the loader), not judged")
    if not all("ERROR SUMMARY" in text for text in texts):
        print("valgrind: memcheck did not finish", file=sys.stderr)
        return 1
    return 1 if ours or any(returncode for returncode, _ in results) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
