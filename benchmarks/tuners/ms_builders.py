"""MetaSchedule's builder, batch after batch: ``LocalBuilder`` (a fresh ``PopenPoolExecutor``
per batch, each worker importing TVM and its tensor intrinsics inside its first
candidate) against ``asynccomp.tvm.Builder`` (warm workers that outlive the batch).

Real ReplayTrace candidates of an fp32 matmul (``tests/ms_candidates.py``; the saved 8 of
a 128^3 matmul by default, ``--fresh N`` samples N anew), the same batch ``--batches``
times on ``--workers`` workers, one builder per configuration:

- ``local``: ``LocalBuilder(max_workers=W, initializer=asynccomp.tvm.register)``, the
  one line asynccomp asked of a TVM user before (compiles on the same compile server);
- ``local-tvm``: plain ``LocalBuilder`` (TVM's own callback), with ``--tvm``;
- ``warm``: ``asynccomp.tvm.Builder(max_workers=W)``, timed from its construction
  (``made``: until every worker is ready) and per batch.

Every candidate's CUDA code (inside its artifact: the CUDA source, or on a GPU machine
the binary TVM compiled, which is all it saves there) is compared across configurations
and batches. Later batches compile the same sources again: cache hits for asynccomp in
both ``local`` and ``warm``, so what differs between those two is the builder's pool.

    python -m benchmarks.tuners.ms_builders --batches 4 --workers 2 --json out.json   # 2 cores
    python -m benchmarks.tuners.ms_builders --fresh 60 --batches 3 --workers 16      # H200
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
from typing import Any


def _rss_mib(pid: int) -> float:
    import psutil

    try:
        return float(psutil.Process(pid).memory_info().rss) / 2**20
    except psutil.NoSuchProcess:
        return 0.0


def run(name: str, builder: Any, inputs: list[Any], batches: int) -> dict[str, Any]:
    from tests.ms_candidates import cuda_source

    times, sources, rss, lost = [], [], [], 0
    for _ in range(batches):
        started = time.perf_counter()
        results = builder.build(inputs)
        times.append(round(time.perf_counter() - started, 3))
        lost += sum(r.error_msg is not None for r in results)
        if hasattr(builder, "pool"):  # the warm workers' resident memory, summed
            rss.append(round(sum(_rss_mib(pid) for pid in builder.pool.pids()), 1))
        sources.append([None if r.error_msg else cuda_source(r.artifact_path) for r in results])
        print(f"{name}: batch {len(times)} {times[-1]} s, lost {lost}", flush=True)
    later = times[1:] or times
    return {
        "batches": times,
        "first": times[0],
        "later_median": statistics.median(later),
        "lost": lost,
        "workers_rss_mib": rss,
        "sources": sources,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--fresh", type=int, default=0, help="sample N new candidates")
    parser.add_argument("--size", type=int, default=128, help="matmul size with --fresh")
    parser.add_argument(
        "--local-batches", type=int, default=0, help="LocalBuilder's (default: --batches)"
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="each candidate's build")
    parser.add_argument("--tvm", action="store_true", help="also plain LocalBuilder")
    parser.add_argument("--warm-only", action="store_true", help="skip LocalBuilder")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    # Each run starts its own templates (as every figure before shared templates did),
    # unless told: benchmarks/tuners/first_autotune.py measures what sharing saves.
    os.environ.setdefault("ASYNCCOMP_SHARED_TEMPLATES", "off")

    from tvm.s_tir import meta_schedule as ms

    import asynccomp.tvm
    from tests.ms_candidates import candidates, saved_candidates

    started = time.perf_counter()
    # starts warming now
    warm = asynccomp.tvm.Builder(max_workers=args.workers, timeout_sec=args.timeout)
    inputs = candidates(args.fresh, args.size) if args.fresh else saved_candidates()
    report: dict[str, Any] = {"candidates": len(inputs), "workers": args.workers}
    warm.pool.wait_ready()
    report["warm_made"] = round(time.perf_counter() - started, 3)
    # 1: its workers forked from a template an earlier process left (shared templates)
    report["warm_joined"] = warm.pool.statistics().joined
    report["warm"] = run("warm", warm, inputs, args.batches)
    # A candidate whose build outlasts the timeout fails in every batch, and each batch
    # then lasts the timeout (both builders lose it). What the warm workers do with the
    # rest: one more batch of the candidates that built every time.
    built = [
        i
        for i in range(len(inputs))
        if all(batch[i] is not None for batch in report["warm"]["sources"])
    ]
    if 0 < len(built) < len(inputs):
        kept = run("warm, the built only", warm, [inputs[i] for i in built], 1)
        report["warm"]["built_only"] = {
            "candidates": len(built),
            "seconds": kept["first"],
            "lost": kept["lost"],
        }
    warm.close()
    if args.warm_only:
        report["warm"].pop("sources")
        print(json.dumps(report))
        asynccomp.tvm.shutdown()
        return 0
    local_batches = args.local_batches or args.batches
    local = ms.builder.LocalBuilder(
        max_workers=args.workers, timeout_sec=args.timeout, initializer=asynccomp.tvm.register
    )
    report["local"] = run("local", local, inputs, local_batches)
    if args.tvm:
        report["local-tvm"] = run(
            "local-tvm",
            ms.builder.LocalBuilder(max_workers=args.workers, timeout_sec=args.timeout),
            inputs,
            local_batches,
        )
    # Candidate by candidate: every source built is the same, whichever builder and batch
    # built it; and the warm builder built every candidate that LocalBuilder built (one
    # that outlasts the timeout is lost in both, so "warm_built_all" says apart whether
    # the warm builder built them all).
    warm_sources, local_sources = report["warm"]["sources"], report["local"]["sources"]
    report["same_source"] = all(
        len({source for source in column if source is not None}) <= 1
        for column in zip(*warm_sources, *local_sources, strict=True)
    )
    report["warm_lost_what_local_built"] = sum(
        any(source is None for source in warm) and any(source is not None for source in local)
        for warm, local in zip(
            zip(*warm_sources, strict=True), zip(*local_sources, strict=True), strict=True
        )
    )
    report["warm_built_all"] = None not in warm_sources[0]
    report["local"]["lost_per_batch_max"] = max(
        sum(source is None for source in batch) for batch in local_sources
    )
    for name in ("warm", "local", "local-tvm"):
        if name in report:
            report[name].pop("sources")
    report["later_speedup"] = round(
        report["local"]["later_median"] / report["warm"]["later_median"], 1
    )
    print(json.dumps(report))
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    asynccomp.tvm.shutdown()
    return 0 if report["same_source"] and not report["warm_lost_what_local_built"] else 1


if __name__ == "__main__":
    sys.exit(main())
