"""What jobs cost while they wait: memory of 10,000 queued jobs against 100.

One NVRTC worker is kept busy by a long compile, then N distinct small jobs are handed to
the engine (``compile_many`` in a task, or ``prefetch``) and left queued behind it. The
Python heap (``tracemalloc``) is measured before the jobs are made, after they are made,
and once all of them are queued; the process's RSS too. The jobs themselves (the user's
``CompileJob`` objects and sources) are reported apart from what queueing them adds.

    python -m benchmarks.compile.queue_memory                  # 100 and 10,000, both ways
    python -m benchmarks.compile.queue_memory --counts 100,10000,50000
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc
from collections.abc import Sequence

import anyio

from asynccomp import CompileJob, Engine

BLOCKER = (
    'extern "C" __global__ void slow(float* x) {\n  float a = x[threadIdx.x];\n'
    + "".join(f"  a = a * {1.0 + i * 1e-6:.7f}f + __sinf(a + {i}.0f);\n" for i in range(30000))
    + "  x[threadIdx.x] = a;\n}\n"
)


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def _job(i: int) -> CompileJob:
    source = f'extern "C" __global__ void k{i}(float* x) {{ x[threadIdx.x] *= {i}.0f; }}\n'
    return CompileJob(source, name=f"k{i}", arch="sm_90a")


async def measure(count: int, how: str) -> dict[str, float]:
    async with Engine(arch="sm_90a", nvrtc_workers=1, nvrtc_mode="threads", cache=False) as e:
        e.prefetch([CompileJob(BLOCKER, name="blocker")])
        with anyio.fail_after(60):
            while e.statistics().running == 0:  # noqa: ASYNC110 - polling a counter
                await anyio.sleep(0.01)
        gc.collect()
        before_jobs, rss_before = tracemalloc.get_traced_memory()[0], _rss()
        jobs = [_job(i) for i in range(count)]
        gc.collect()
        after_jobs = tracemalloc.get_traced_memory()[0]
        async with anyio.create_task_group() as tg:
            if how == "compile_many":
                tg.start_soon(e.compile_many, jobs)
            else:
                e.prefetch(jobs)
            with anyio.fail_after(120):
                while e.statistics().queued < count:  # noqa: ASYNC110
                    await anyio.sleep(0.01)
            gc.collect()
            queued, rss_queued = tracemalloc.get_traced_memory()[0], _rss()
            tg.cancel_scope.cancel()
        e.cancel_prefetched()
    return {
        "jobs_mb": (after_jobs - before_jobs) / 2**20,
        "queue_mb": (queued - after_jobs) / 2**20,
        "total_mb": (queued - before_jobs) / 2**20,
        "rss_mb": (rss_queued - rss_before) / 2**20,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", default="100,10000")
    parser.add_argument("--how", default="compile_many,prefetch")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.counts.split(",")]
    tracemalloc.start()
    rows: dict[tuple[str, int], dict[str, float]] = {}
    for how in args.how.split(","):
        for count in counts:
            rows[how, count] = anyio.run(measure, count, how)
            r = rows[how, count]
            print(
                f"{how:<12} {count:>6} jobs: jobs {r['jobs_mb']:7.2f} MB, queueing them "
                f"{r['queue_mb']:7.2f} MB, together {r['total_mb']:7.2f} MB "
                f"(RSS +{r['rss_mb']:.1f} MB)"
            )
        low, high = min(counts), max(counts)
        extra = rows[how, high]["total_mb"] - rows[how, low]["total_mb"]
        print(f"{how}: {high} queued jobs cost {extra:.1f} MB more than {low}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
