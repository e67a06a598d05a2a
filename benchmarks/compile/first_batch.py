"""The first batch against the next ones: how much of a tuning run's first batch is
start-up (issue 36: "fast on the first batch").

Each trial is a fresh Python process: it starts an engine (whose NVRTC template starts in
the background), renders the corpus's kernels as TVM 0.27 hands them to its callback (the
user's own set-up, overlapping the engine's start), then compiles them as one batch:
``cold``, from the engine's start. Then the same kernels twice more, each pass with every
source made new (a comment added: no hit in asynccomp's cache): ``warm``, the faster of
the two. NVRTC's own cache (``~/.nv``, on GPU machines) ignores such a comment, so it is
off (``CUDA_CACHE_DISABLE=1``) unless ``--nvrtc-cache``: with it on, the "warm" batches
are its hits, and so is every batch of the machine's later processes. That is what made
a fresh GPU machine's first batch look 16x slower than warm (2026-12-07: 12.6 s against
0.80 s with the cache on; the first batch wrote 115 files into ``~/.nv/ComputeCache``).

Beside each batch's wall time it records where the machine's time went while it ran
(``/proc/stat``'s user, system, iowait and steal seconds summed over the CPUs, and
``/proc/vmstat``'s page faults) and the jobs' own compile times (median, longest, sum): a
fresh machine's slow first batch shows there whether it waits (iowait), pays its host
(steal), faults pages in (system, major faults) or just computes slower (user).

    python -m benchmarks.compile.first_batch                          # built-in examples
    python -m benchmarks.compile.first_batch --corpus corpus --workers 16 --trials 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from benchmarks._corpus import add_corpus_argument, largest_files
from benchmarks._nvrtc_cache import add_nvrtc_cache_argument, apply_nvrtc_cache
from benchmarks._trials import fresh_trial

if TYPE_CHECKING:
    from asynccomp import CompileResult

_STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def _counters() -> dict[str, float]:
    """The machine's CPU seconds by kind and its page-fault counts (Linux; empty elsewhere)."""
    found: dict[str, float] = {}
    try:
        first = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
        ticks = os.sysconf("SC_CLK_TCK")
        found.update({k: int(v) / ticks for k, v in zip(_STAT_FIELDS, first, strict=False)})
        for line in Path("/proc/vmstat").read_text().splitlines():
            name, _, value = line.partition(" ")
            if name in ("pgfault", "pgmajfault", "pgpgin", "pgpgout"):
                found[name] = int(value)
    except OSError:
        pass
    return found


def _delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: round(after[k] - before[k], 3) for k in before if k in after}


def _each_job(results: Sequence[CompileResult]) -> list[tuple[float, float]]:
    """Each job's (queued, compiling) seconds, in the batch's order: late workers show as
    long queues, slow compiles as long compiles."""
    return [(round(r.queued, 3), round(r.elapsed, 3)) for r in results]


def _job_times(each: Sequence[tuple[float, float]]) -> dict[str, float]:
    """The jobs' compile seconds: median, longest, sum."""
    elapsed = sorted(compiling for _, compiling in each)
    return {
        "median": round(statistics.median(elapsed), 3),
        "max": elapsed[-1],
        "sum": round(sum(elapsed), 3),
    }


def _trial(files: list[str], arch: str, workers: int) -> dict[str, object]:
    import anyio

    from asynccomp import Engine
    from asynccomp.tvm import make_job

    texts = {f: Path(f).read_text() for f in files}  # read before: the set-up renders

    async def run() -> dict[str, object]:
        at_start = _counters()
        began = time.perf_counter()
        async with Engine(arch=arch, nvrtc_workers=workers, cache=False) as engine:
            started = time.perf_counter()
            jobs = [make_job(texts[f], arch=arch) for f in files]  # the user's set-up
            rendered = time.perf_counter()
            results = await engine.compile_many(jobs)
            cold = time.perf_counter() - began
            cold_counters = _delta(at_start, _counters())
            assert all(r.ok for r in results), [str(r.error) for r in results if not r.ok]
            cold_each = _each_job(results)
            warm = []
            warm_counters: dict[str, float] = {}
            warm_jobs: dict[str, float] = {}
            for n in (1, 2):
                fresh = [make_job(texts[f] + f"\n// pass {n}\n", arch=arch) for f in files]
                before = _counters()
                at = time.perf_counter()
                again = await engine.compile_many(fresh)
                warm.append(time.perf_counter() - at)
                if warm[-1] == min(warm):
                    warm_counters = _delta(before, _counters())
                    warm_jobs = _job_times(_each_job(again))
                assert all(r.ok for r in again)
        return {
            "engine_start": started - began,
            "setup": rendered - started,
            "cold": cold,
            "warm": min(warm),
            "cold_machine": cold_counters,
            "warm_machine": warm_counters,
            "cold_jobs": _job_times(cold_each),
            "cold_each": cold_each,
            "warm_jobs": warm_jobs,
        }

    return anyio.run(run)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_argument(parser)
    parser.add_argument("--largest", type=int, default=0, help="the N largest kernels (0: all)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    add_nvrtc_cache_argument(parser)
    parser.add_argument("--trial", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    apply_nvrtc_cache(args)  # read by every trial's process and its workers
    if args.trial is not None:
        print(json.dumps(_trial(args.trial, args.arch, args.workers)))
        return 0
    files = largest_files(args.corpus, args.largest)
    print(
        f"{len(files)} kernels, {args.workers} workers, {args.trials} fresh processes, "
        f"NVRTC's own cache {'on' if args.nvrtc_cache else 'off'}"
    )
    trials = []
    for number in range(args.trials):
        command = ["--workers", str(args.workers), "--arch", args.arch, "--trial"]
        trial = fresh_trial("benchmarks.compile.first_batch", [*command, *map(str, files)])
        if trial is None:
            return 1
        trials.append(trial)
        print(
            f"trial {number + 1}: engine start {trial['engine_start']:.3f} s, set-up "
            f"{trial['setup']:.3f} s, first batch (from the engine's start) {trial['cold']:.3f} "
            f"s, warm batch {trial['warm']:.3f} s: {trial['cold'] / trial['warm']:.2f}x",
            flush=True,
        )
        queued = max(q for q, _ in trial["cold_each"])
        print(f"  cold: the longest queue {queued:.3f} s")
        for phase in ("cold", "warm"):
            print(f"  {phase}: machine {trial[phase + '_machine']}; jobs {trial[phase + '_jobs']}")
    summary = {
        key: statistics.median(t[key] for t in trials)
        for key in ("engine_start", "setup", "cold", "warm")
    }
    summary["ratio"] = summary["cold"] / summary["warm"]
    print(
        f"median: first batch {summary['cold']:.3f} s, warm {summary['warm']:.3f} s, "
        f"{summary['ratio']:.2f}x (first trial, the freshest: "
        f"{trials[0]['cold'] / trials[0]['warm']:.2f}x)"
    )
    if args.json is not None:
        args.json.write_text(json.dumps({"trials": trials, "median": summary}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
