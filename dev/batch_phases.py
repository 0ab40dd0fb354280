"""Where the time of issue 35's `py batch` rows goes, phase by phase.

The bench's `py batch H2D` and `py batch D2H` rows (1000 x 4 KiB) give one ratio
each against torch's loop. This script times the pieces of that call beside it, on
the same machine in one run, so that a GPU session learns which piece to cut:

  H2D (1000 NumPy arrays of 4 KiB to cuda:0)
    call            to_device(xs, "cuda:0"), the bench row (blocking)
    call nb         the same with non_blocking=True, then one wait
    to cpu          import, plan and pack into new host memory: no device at all
    views           to_device(xs, "cpu", copy=False): import, plan and a view each,
                    the per-tensor floor of a batch without any copy
    concatenate     np.concatenate(xs): the pack's bytes on one thread
    one DMA         one 4 MiB page-locked array to cuda:0 (our call, one copy)
    torch loop      torch's .to("cuda", non_blocking=True) loop and one synchronize
  D2H (1000 tensors of 4 KiB on cuda:0: torch's where torch has CUDA, else ours)
    call nb         to_device(ys, "cpu", non_blocking=True), then one wait: the row
    call            the same, blocking
    views           to_device(ys, "cuda:0"): import, plan and a view each, no copy
    one DMA         one 4 MiB cuda:0 tensor to page-locked memory
    torch loop      torch's .to("cpu", non_blocking=True) loop and one synchronize

Each line is the median of at least 25 calls after 5 warm-up calls, in
microseconds a call and nanoseconds a tensor. Without a GPU it runs on the fake
driver (ARRAYBRIDGE_CUDA_LIBRARY), whose timings mean nothing: CI runs it so that
the script keeps working.

    python dev/batch_phases.py [--reps N] [--tensors N]
"""

import argparse
import math
import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

import arraybridge as ab  # noqa: E402

try:
    import torch

    torch = torch if torch.cuda.is_available() else None
except ImportError:
    torch = None


def synchronize():
    if torch is not None:
        torch.cuda.synchronize()


def median_us(call, reps):
    for _ in range(5):
        call()
        synchronize()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        call()
        synchronize()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2] * 1e6


def waited(results):
    results[-1].wait()  # the batch's one event: every result holds it


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=25)
    parser.add_argument("--tensors", type=int, default=1000)
    args = parser.parse_args()
    if args.reps < 1 or args.tensors < 1:
        parser.error("--reps and --tensors must be at least 1")
    n, reps = args.tensors, args.reps
    xs = [np.full(1024, i, dtype=np.float32) for i in range(n)]
    block = ab.to_device(np.ones(n * 4096, dtype=np.uint8), "cuda_host")
    rows = []

    def row(direction, name, call):
        us = median_us(call, reps)
        rows.append((direction, name, us))
        print(f"{direction}  {name:<12} {us:10.1f} us  {us * 1e3 / n:8.0f} ns a tensor", flush=True)

    row("H2D", "call", lambda: ab.to_device(xs, "cuda:0"))
    row("H2D", "call nb", lambda: waited(ab.to_device(xs, "cuda:0", non_blocking=True)))
    row("H2D", "to cpu", lambda: ab.to_device(xs, "cpu"))
    row("H2D", "views", lambda: ab.to_device(xs, "cpu", copy=False))
    row("H2D", "concatenate", lambda: np.concatenate(xs))
    row("H2D", "one DMA", lambda: ab.to_device(block, "cuda:0"))
    if torch is not None:
        row("H2D", "torch loop", lambda: [torch.from_numpy(x).to("cuda", non_blocking=True) for x in xs])

    ys = [torch.from_numpy(x).cuda() for x in xs] if torch is not None else ab.to_device(xs, "cuda:0")
    on_device = ab.to_device(np.ones(n * 4096, dtype=np.uint8), "cuda:0")
    row("D2H", "call nb", lambda: waited(ab.to_device(ys, "cpu", non_blocking=True)))
    row("D2H", "call", lambda: ab.to_device(ys, "cpu"))
    row("D2H", "views", lambda: ab.to_device(ys, "cuda:0"))
    row("D2H", "one DMA", lambda: ab.to_device(on_device, "cuda_host"))
    if torch is not None:
        row("D2H", "torch loop", lambda: [y.to("cpu", non_blocking=True) for y in ys])

    # What the rows say together: the call less its parts that need no device.
    us = {(d, name): value for d, name, value in rows}
    for direction, call in (("H2D", "call"), ("D2H", "call nb")):
        floor = us[(direction, "views")]
        rest = us[(direction, call)] - floor - us[(direction, "one DMA")]
        print(f"{direction}  {call}: {floor:.0f} us of per-tensor floor (views), {us[(direction, 'one DMA')]:.0f} us "
              f"of one DMA, {rest:.0f} us else (packing, results, waits)")
        if (direction, "torch loop") in us:
            ratio = us[(direction, "torch loop")] / us[(direction, call)]
            print(f"{direction}  torch loop / {call}: {ratio:.2f}x (issue 35's target: 10x)")
    sys.stdout.flush()
    return 0 if all(math.isfinite(value) for _, _, value in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
