"""Does NVRTC's ``--split-compile`` shorten the longest kernels of a corpus?

With longest-first dispatch a sweep ends no sooner than its longest single job, so the
only place ``Engine(split_compile=N)`` can pay is that job: it gives the jobs that would
finish last ``--split-compile=N`` (NVVM's optimizer on N threads). This script measures
exactly that, in this process, one compile at a time: every kernel of the folder is
compiled once as TVM 0.27 compiles it with the preamble fast path (the engine's default),
the ``--longest`` slowest are kept, and each of those is compiled ``--repeat`` times
without and with each ``--split`` value, alternating, after a warm-up compile. It prints
the median times and whether the SASS (``cuobjdump -sass``) stays the same.

    python -m benchmarks.compile.split_compile                  # built-in examples, split 2
    python -m benchmarks.compile.split_compile --corpus corpus  # the README's corpus
    python -m benchmarks.compile.split_compile --split 2,4,8,0 --longest 3 --repeat 3

``--split 0`` means "as many threads as the machine has" (NVRTC's meaning of 0). The
threads come from the same cores the other workers use: on a busy sweep a split job
competes with them, which this one-at-a-time measurement does not show.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Sequence

from benchmarks._corpus import add_corpus_argument, corpus_files
from benchmarks.parity.fast_path_sass import (
    find_cuobjdump,
    sass_of,
    timed_tvm_compiles,
    tvm_compile,
)


def _splits(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--split takes integers, not {text!r}") from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"--split takes integers >= 0, not {text!r}")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_argument(parser)
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--split", type=_splits, default=[2], help="comma-separated N values")
    parser.add_argument("--longest", type=int, default=3, help="how many of the slowest")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    files = corpus_files(args.corpus)
    cuobjdump = find_cuobjdump()
    where = args.corpus or "the built-in examples"
    print(f"{len(files)} kernels from {where}; {os.cpu_count()} CPUs; arch {args.arch}")
    timed = sorted(
        ((seconds, path) for path, _, seconds in timed_tvm_compiles(files, args.arch)),
        reverse=True,
    )
    print(f"one pass, unsplit: {sum(t for t, _ in timed):.1f} s in all")

    variants = [None, *args.split]
    header = f"{'kernel':<28}" + "".join(
        f"{'unsplit' if v is None else f'split={v}':>12}" for v in variants
    )
    print(f"\nmedian of {args.repeat} (seconds); SASS compared with the unsplit cubin")
    print(header)
    print("-" * len(header))
    all_same = True
    for _, path in timed[: args.longest]:
        code = path.read_text()
        seconds: dict[int | None, list[float]] = {v: [] for v in variants}
        cubins: dict[int | None, bytes] = {}
        for _ in range(args.repeat):
            for v in variants:
                extra = () if v is None else (f"--split-compile={v}",)
                compiled = tvm_compile(code, args.arch, rewrite=True, extra_options=extra)
                if compiled.error or compiled.cubin is None:
                    print(f"{path.name} split={v}: {compiled.error}", file=sys.stderr)
                    return 1
                seconds[v].append(compiled.seconds)
                cubins[v] = compiled.cubin
        reference = sass_of(cubins[None], cuobjdump)
        cells = []
        for v in variants:
            same = v is None or sass_of(cubins[v], cuobjdump) == reference
            all_same &= same
            cells.append(f"{statistics.median(seconds[v]):>11.2f}{'' if same else '!'}")
        print(f"{path.stem:<28}" + "".join(cells))
    print("\nSASS identical for every split" if all_same else "\n! marks SASS that differs")
    return 0 if all_same else 1


if __name__ == "__main__":
    raise SystemExit(main())
