"""The compile cache through the engine: hit latency, and a sweep with repeated sources.

1. **Hit latency.** Every kernel is compiled once into a fresh cache folder; then each
   job is asked for again, ``--hits`` times, and each ``await engine.compile(job)`` is
   timed: from the memory level (the same engine), from the disk level (a new engine,
   so its memory level is empty), and through :class:`~asynccomp.SyncEngine` (the
   blocking portal the TVM callback uses). Prints median and p99 in milliseconds.
2. **A sweep with repeats.** ``--repeat-fraction`` (default 0.5) of the jobs repeat
   earlier sources (shuffled, as an autotuner re-proposing candidates would). The sweep
   runs once with the cache off and once with an empty cache (memory + disk); both
   engines are warmed up first. Prints wall times, compiler runs, hits and dedupes.

    python -m benchmarks.cache.sweep                        # the built-in examples
    python -m benchmarks.cache.sweep --corpus corpus --arch sm_90a

"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import anyio

from asynccomp import CompileJob, Engine, SyncEngine
from benchmarks._corpus import add_corpus_argument, corpus_files


def load_jobs(corpus: Path | None, arch: str, limit: int | None) -> list[CompileJob]:
    paths = corpus_files(corpus)
    paths = paths[:limit] if limit else paths
    return [CompileJob(p.read_text(), name=p.stem, arch=arch) for p in paths]


def summary_ms(seconds: Sequence[float]) -> dict[str, float]:
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {
        "median_ms": round(statistics.median(ordered) * 1e3, 4),
        "p99_ms": round(p99 * 1e3, 4),
        "n": len(ordered),
    }


async def hit_latency(jobs: list[CompileJob], cache_dir: Path, hits: int) -> dict[str, object]:
    async with Engine(cache_dir=cache_dir) as engine:
        for result in await engine.compile_many(jobs):
            result.unwrap()
        memory = []
        for _ in range(hits):
            for job in jobs:
                started = time.perf_counter()
                result = await engine.compile(job)
                memory.append(time.perf_counter() - started)
                assert result.cached
    disk = []
    for _ in range(hits):
        # A new engine per round: its memory level starts empty, so every hit is a disk read.
        async with Engine(cache_dir=cache_dir) as engine:
            for job in jobs:
                started = time.perf_counter()
                result = await engine.compile(job)
                disk.append(time.perf_counter() - started)
                assert result.cached
    return {"memory": summary_ms(memory), "disk": summary_ms(disk)}


def sync_hit_latency(jobs: list[CompileJob], cache_dir: Path, hits: int) -> dict[str, float]:
    times = []
    with SyncEngine(cache_dir=cache_dir) as engine:
        for _ in range(hits):
            for job in jobs:
                started = time.perf_counter()
                assert engine.compile(job).cached
                times.append(time.perf_counter() - started)
    return summary_ms(times)


async def sweep(jobs: list[CompileJob], cache_dir: Path | None) -> dict[str, object]:
    options = {"cache": False} if cache_dir is None else {"cache_dir": cache_dir}
    async with Engine(**options) as engine:
        await engine.warm_up()
        started = time.perf_counter()
        results = await engine.compile_many(jobs)
        wall = time.perf_counter() - started
        stats = engine.statistics()
    assert all(r.ok for r in results), [str(r.error) for r in results if not r.ok]
    return {
        "wall_s": round(wall, 3),
        "compiled": stats.compiled,
        "cache_hits": stats.cache_hits,
        "deduplicated": stats.deduplicated,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_argument(parser)
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--limit", type=int, default=None, help="use the first N kernels")
    parser.add_argument("--hits", type=int, default=20, help="hit rounds per job")
    parser.add_argument("--repeat-fraction", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    jobs = load_jobs(args.corpus, args.arch, args.limit)
    report: dict[str, object] = {"kernels": len(jobs)}
    with tempfile.TemporaryDirectory(prefix="asynccomp-cache-bench-") as tmp:
        report["hit_latency"] = anyio.run(hit_latency, jobs, Path(tmp) / "hits", args.hits)
        report["hit_latency_sync"] = sync_hit_latency(jobs, Path(tmp) / "hits", args.hits)

        rng = random.Random(args.seed)
        unique = round(len(jobs) * (1 - args.repeat_fraction))
        fresh = jobs[:unique]
        repeats = [rng.choice(fresh) for _ in range(len(jobs) - unique)]
        mixed = fresh + repeats
        rng.shuffle(mixed)
        report["sweep"] = {
            "jobs": len(mixed),
            "unique": len(fresh),
            "no_cache": anyio.run(sweep, mixed, None),
            "cache": anyio.run(sweep, mixed, Path(tmp) / "sweep"),
        }
    print(json.dumps(report, indent=2))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
