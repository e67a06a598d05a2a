"""A user's first impression: the first batch through a fresh engine, against its ideal.

A fresh process starts a fresh engine (no worker yet, empty cache) and compiles the
``--largest`` biggest kernels of a corpus as one batch, the way TVM 0.27 compiles them
(``asynccomp.tvm.make_job``, with the preamble fast path). That wall time ("cold") is
compared with the ideal: the same kernels compiled warm, one at a time, in one worker
(their summed time divided by the workers, or the longest one if that is more), measured
afterwards in the same run. Each trial runs in a new Python process, so nothing is warm
but the operating system's file cache (NVRTC's own cache is off unless ``--nvrtc-cache``).

    python -m benchmarks.compile.cold_batch                          # built-in examples, 6 largest
    python -m benchmarks.compile.cold_batch --corpus corpus --largest 16 --trials 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from asynccomp._os import child_environ
from benchmarks._corpus import add_corpus_argument, largest_files
from benchmarks._nvrtc_cache import add_nvrtc_cache_argument, apply_nvrtc_cache


def _trial(files: list[str], arch: str, workers: int) -> dict[str, object]:
    """One cold batch, then the warm one-at-a-time times (run in a fresh process)."""
    import anyio

    from asynccomp import Engine
    from asynccomp.tvm import make_job

    jobs = [make_job(Path(f).read_text(), arch=arch) for f in files]

    async def run() -> dict[str, object]:
        started = time.perf_counter()
        async with Engine(arch=arch, nvrtc_workers=workers, cache=False) as engine:
            results = await engine.compile_many(jobs)
            cold = time.perf_counter() - started
            assert all(r.ok for r in results), [str(r.error) for r in results if not r.ok]
            singles = []
            for job in jobs:  # warm now: one at a time, for the ideal
                singles.append((await engine.compile(job)).elapsed)
        return {"cold": cold, "singles": singles}

    return anyio.run(run)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_argument(parser)
    parser.add_argument("--largest", type=int, default=6)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--arch", default="sm_90a")
    add_nvrtc_cache_argument(parser)
    parser.add_argument("--trial", help=argparse.SUPPRESS)  # internal: one trial's JSON
    args = parser.parse_args(argv)
    apply_nvrtc_cache(args)  # the warm compiles repeat the cold ones' programs
    if args.trial:
        spec = json.loads(args.trial)
        print(json.dumps(_trial(spec["files"], spec["arch"], spec["workers"])))
        return 0
    files = [str(f) for f in largest_files(args.corpus, args.largest)]
    if not files:
        print("no kernels found", file=sys.stderr)
        return 2
    print(
        f"{len(files)} largest kernels ({', '.join(Path(f).stem for f in files)}); "
        f"{args.workers} workers; {os.cpu_count()} CPUs; {args.trials} trial(s)"
    )
    colds, ideals = [], []
    for number in range(1, args.trials + 1):
        spec = json.dumps({"files": files, "arch": args.arch, "workers": args.workers})
        with tempfile.TemporaryDirectory() as cache:
            env = child_environ(ASYNCCOMP_CACHE_DIR=cache)  # this checkout, any folder
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.compile.cold_batch", "--trial", spec],
                capture_output=True,
                text=True,
                check=True,
                env=env,
            ).stdout
        measured = json.loads(out.strip().splitlines()[-1])
        singles = measured["singles"]
        ideal = max(sum(singles) / args.workers, max(singles))
        colds.append(measured["cold"])
        ideals.append(ideal)
        print(
            f"trial {number}: cold batch {measured['cold']:.2f} s, ideal {ideal:.2f} s "
            f"(warm singles {', '.join(f'{s:.2f}' for s in singles)}), "
            f"{measured['cold'] / ideal:.2f}x"
        )
    cold, ideal = statistics.median(colds), statistics.median(ideals)
    print(f"median: cold batch {cold:.2f} s against an ideal of {ideal:.2f} s: {cold / ideal:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
