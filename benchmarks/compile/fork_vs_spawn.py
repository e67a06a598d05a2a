"""An NVRTC worker forked from the warm template against one spawned fresh: is a forked
worker's compile any slower once both are warm? (Issue 35: one worker measured 6% slower
in ``asynccomp bench`` after the template came, within that machine's noise.)

Each trial is a fresh Python process with an engine of one NVRTC worker, forked from the
template (as shipped) or spawned (the pool's fallback where forking is unsafe), warmed up,
then the corpus compiled three times, every pass's sources new (a comment added: no cache
hit, no NVRTC cache hit either). The two kinds alternate, pair by pair (A B, B A, ...), and
each pair's ratio of best passes is taken: pairing keeps the ratio meaningful while the
machine's speed drifts.

    python -m benchmarks.compile.fork_vs_spawn                          # built-in examples
    python -m benchmarks.compile.fork_vs_spawn --corpus corpus --largest 15 --pairs 8
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks._corpus import add_corpus_argument, largest_files
from benchmarks._trials import fresh_trial


def _trial(files: list[str], arch: str, kind: str) -> dict[str, object]:
    import dataclasses

    import anyio
    import psutil

    import asynccomp.backends._nvrtc_workers as nvrtc_workers
    from asynccomp import CompileJob, Engine

    if kind == "spawn":
        # The pool's own fallback (what it does when its template has threads), chosen
        # here by hand: no setting offers it, as nothing but this question needs it.
        shipped = nvrtc_workers.NvrtcWorkers._settings
        nvrtc_workers.NvrtcWorkers._settings = lambda self: dataclasses.replace(  # type: ignore[method-assign]
            shipped(self), fork=False
        )
    texts = {f: Path(f).read_text() for f in files}

    async def run() -> dict[str, object]:
        passes = []
        async with Engine(arch=arch, cache=False, nvrtc_mode="processes", nvrtc_workers=1) as e:
            await e.warm_up()
            # Forked: the template and its worker; spawned: the worker alone.
            processes = len(psutil.Process().children(recursive=True))
            for n in range(3):
                jobs = [CompileJob(texts[f] + f"\n// pass {n}\n", name=Path(f).stem) for f in files]
                at = time.perf_counter()
                results = await e.compile_many(jobs)
                passes.append(time.perf_counter() - at)
                assert all(r.ok for r in results), [str(r.error) for r in results if not r.ok]
        return {"kind": kind, "passes": passes, "processes": processes}

    return anyio.run(run)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_argument(parser)
    parser.add_argument("--largest", type=int, default=0, help="the N largest kernels (0: all)")
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--trial", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--kind", choices=("fork", "spawn"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.trial is not None:
        print(json.dumps(_trial(args.trial, args.arch, args.kind)))
        return 0
    files = largest_files(args.corpus, args.largest)
    print(f"{len(files)} kernels, 1 NVRTC worker, {args.pairs} pairs of fresh processes")
    pairs = []
    for number in range(args.pairs):
        order = ("fork", "spawn") if number % 2 == 0 else ("spawn", "fork")
        best: dict[str, float] = {}
        for kind in order:
            command = ["--arch", args.arch, "--kind", kind, "--trial", *map(str, files)]
            trial = fresh_trial("benchmarks.compile.fork_vs_spawn", command)
            if trial is None:
                return 1
            assert trial["processes"] == (2 if kind == "fork" else 1), trial
            best[kind] = min(trial["passes"])
        ratio = best["fork"] / best["spawn"]
        pairs.append({**best, "ratio": ratio})
        print(
            f"pair {number + 1}: forked {best['fork']:.3f} s, spawned {best['spawn']:.3f} s "
            f"(best of 3 passes): {ratio:.3f}",
            flush=True,
        )
    ratios = [p["ratio"] for p in pairs]
    print(
        f"forked / spawned, median of the pairs: {statistics.median(ratios):.3f} "
        f"(range {min(ratios):.3f}-{max(ratios):.3f}; below 1: the forked worker is faster)"
    )
    if args.json is not None:
        args.json.write_text(json.dumps({"pairs": pairs}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
