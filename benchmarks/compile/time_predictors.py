"""How well does a kernel's source size predict its NVRTC compile time?

The numbers behind :mod:`asynccomp.cost`'s docstring. Every kernel of a folder is
compiled once, one at a time in this process, as TVM 0.27 compiles it with the preamble
fast path (the engine's default), after one warm-up compile; then the rank correlation
(Spearman) of source size against compile time is printed, with the kernels whose
time strays furthest from what their size predicts.

    python -m benchmarks.compile.time_predictors                 # the built-in examples
    python -m benchmarks.compile.time_predictors --corpus corpus --arch sm_90a
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence

from benchmarks._corpus import add_corpus_argument, corpus_files
from benchmarks.parity.fast_path_sass import timed_tvm_compiles


def ranks(values: Sequence[float]) -> list[int]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0] * len(values)
    for rank, index in enumerate(order):
        out[index] = rank
    return out


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    n = len(a)
    d2 = sum((x - y) ** 2 for x, y in zip(ranks(a), ranks(b), strict=True))
    return 1 - 6 * d2 / (n * (n * n - 1))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_argument(parser)
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--outliers", type=int, default=5)
    args = parser.parse_args(argv)
    files = corpus_files(args.corpus)
    if len(files) < 3:
        print(f"need at least 3 *.cu files in {args.corpus}", file=sys.stderr)
        return 2
    sizes, times = [], []
    for path, code, seconds in timed_tvm_compiles(files, args.arch):
        sizes.append(len(code))
        times.append(seconds)
        print(f"{path.stem:<28} {len(code) / 1024:>7.0f} KB {seconds:>8.3f} s", flush=True)
    print(f"\nSpearman rank correlation, size vs time: {spearman(sizes, times):.2f}")
    # A log-log least-squares line; the furthest points are the size model's worst misses.
    lx, ly = [math.log(s) for s in sizes], [math.log(t) for t in times]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    slope = sum((x - mx) * (y - my) for x, y in zip(lx, ly, strict=True)) / sum(
        (x - mx) ** 2 for x in lx
    )
    misses = sorted(
        ((ly[i] - (my + slope * (lx[i] - mx)), i) for i in range(len(files))),
        key=lambda m: -abs(m[0]),
    )
    print("worst misses of a size model (actual / predicted):")
    for residual, i in misses[: args.outliers]:
        print(
            f"  {files[i].stem:<28} {sizes[i] / 1024:>6.0f} KB {times[i]:>7.3f} s  "
            f"{math.exp(residual):.1f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
