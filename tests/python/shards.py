"""Runs one pytest command as N processes at once, each keeping its shard of the tests
(ARRAYBRIDGE_TEST_SHARD=k/N, conftest.py), and sums up as pytest would: on CI's two
cores, suites whose tests wait on subprocesses or run under memcheck take about half
the time. Each shard's output is shown whole, one after another, then one line over
all of them ("2 failed, 1070 passed, 3 skipped in 401.2s"). Exits non-zero if any
shard failed.

    python tests/python/shards.py N [pytest arguments]
"""
import os
import re
import subprocess
import sys
import time

SUMMARY = re.compile(r"\b(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed|warnings?)\b")


def run(commands, envs):
    """Starts every command with its environment, waits for all; their (returncode, output)."""
    procs = [subprocess.Popen(c, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for c, e in zip(commands, envs)]
    outputs = [p.communicate()[0] for p in procs]
    return [(p.returncode, output) for p, output in zip(procs, outputs)]


def shard_env(k, n, env=None):
    return dict(env if env is not None else os.environ, ARRAYBRIDGE_TEST_SHARD=f"{k}/{n}")


def summed(outputs, seconds):
    """One pytest-style summary line over the shards' last summary lines."""
    counts = {}
    for output in outputs:
        lines = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed|skipped).* in [0-9.]+s", line)]
        for number, word in SUMMARY.findall(lines[-1] if lines else ""):
            word = {"error": "errors", "warning": "warnings"}.get(word, word)
            if word != "deselected":  # each shard deselects the others' tests
                counts[word] = counts.get(word, 0) + int(number)
    order = ["failed", "errors", "passed", "skipped", "xfailed", "xpassed", "warnings"]
    words = [f"{counts[w]} {w}" for w in order if counts.get(w)] or ["no tests ran"]
    return f"{', '.join(words)} in {seconds:.1f}s (over {len(outputs)} shards)"


def show(results, seconds):
    """Each shard's output whole, one after another, then (for more than one) the line
    over all of them."""
    for k, (_, output) in enumerate(results):
        if len(results) > 1:
            print(f"-- shard {k + 1} of {len(results)}")
        print(output, end="" if output.endswith("\n") else "\n")
    if len(results) > 1:
        print(summed([output for _, output in results], seconds))


def main(argv):
    if not argv or not argv[0].isdigit() or int(argv[0]) < 1:
        print("usage: shards.py N [pytest arguments]", file=sys.stderr)
        return 2
    n, args = int(argv[0]), argv[1:]
    start = time.monotonic()
    command = [sys.executable, "-m", "pytest", *args]
    results = run([command] * n, [shard_env(k, n) for k in range(n)])
    show(results, time.monotonic() - start)
    return max(returncode for returncode, _ in results)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
