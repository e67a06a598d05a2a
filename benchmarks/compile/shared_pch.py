"""One precompiled header shared by the NVRTC workers forked from one template, against
one per worker (issue 36: "NVRTC's precompiled header made once and shared by the workers
that can use it").

Each trial is a fresh Python process: an engine of ``--workers`` NVRTC workers, warmed up
(forked, NVRTC loaded), then two batches of ``--jobs`` kernels that all begin with the
same heavy header prefix (CCCL's ``cuda/std`` and CUB's block headers: about 3 s to
compile, 4 s to make a PCH of, 0.7 s with one), each compiled with ``CompileJob(pch=True)``,
every kernel's body new; then every worker is killed and one more kernel compiled (on
a new fork of the same template, as after a crash, a timeout's kill or a recycle).
``shared`` is asynccomp as shipped; ``private`` gives each worker
its own PCH (what workers that cannot share do, and what every worker did before). It
reports each batch's time, the workers' CPU seconds, the PCH files made and their bytes on
disk. Modes alternate, pair by pair.

    python -m benchmarks.compile.shared_pch                       # this machine's CPUs
    python -m benchmarks.compile.shared_pch --workers 16 --jobs 64 --pairs 2
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

from benchmarks._trials import fresh_trial

HEADERS = (
    "cuda/std/type_traits",
    "cuda/std/tuple",
    "cuda/std/array",
    "cuda/std/complex",
    "cuda/std/atomic",
    "cuda/std/chrono",
    "cuda/std/span",
    "cuda/std/mdspan",
    "cub/block/block_reduce.cuh",
    "cub/block/block_scan.cuh",
    "cub/block/block_radix_sort.cuh",
    "cub/warp/warp_reduce.cuh",
)
BODY = """extern "C" __global__ void k{n}(float* x) {{
  using Reduce = cub::BlockReduce<float, {threads}>;
  __shared__ typename Reduce::TempStorage scratch;
  float v = Reduce(scratch).Sum(x[threadIdx.x] * {n}.0f);
  if (threadIdx.x == 0) x[blockIdx.x] = v;
}}
"""


def kernel(n: int) -> str:
    prefix = "".join(f"#include <{h}>\n" for h in HEADERS)
    return prefix + BODY.format(n=n, threads=(32, 64, 128, 256)[n % 4])


def _pch_bytes() -> tuple[int, int]:
    """PCH files under this process's NVRTC worker folders: how many, and their bytes on
    disk (a file linked under two names counted once)."""
    from asynccomp.backends._nvrtc_files import worker_folders_root

    seen: dict[int, int] = {}
    for folder in worker_folders_root().glob(f"{os.getpid()}-*"):
        for path in folder.rglob("*.pch"):
            info = path.stat()
            seen[info.st_ino] = info.st_blocks * 512
    return len(seen), sum(seen.values())


def _trial(workers: int, jobs: int, arch: str, mode: str) -> dict[str, object]:
    import anyio
    import psutil

    import asynccomp.backends._nvrtc_workers as nvrtc_workers
    from asynccomp import CompileJob, Engine
    from asynccomp.workers import PoolSettings

    if mode == "private":
        # What workers that cannot share do (spawned ones), chosen by hand: no setting
        # offers it, as nothing but this comparison needs it.
        shipped = nvrtc_workers.NvrtcWorkers._settings

        def private(self: nvrtc_workers.NvrtcWorkers) -> PoolSettings:
            self._share_pch = False  # NvrtcWorkers(share_pch=False), as the tests make it
            return shipped(self)

        nvrtc_workers.NvrtcWorkers._settings = private  # type: ignore[method-assign]

    def cpu_seconds() -> float:
        total = 0.0
        for child in psutil.Process().children(recursive=True):
            try:
                times = child.cpu_times()
            except psutil.Error:
                continue
            total += times.user + times.system
        return total

    async def run() -> dict[str, object]:
        batches, logs = [], []
        async with Engine(
            arch=arch, cache=False, nvrtc_mode="processes", nvrtc_workers=workers
        ) as e:
            await e.warm_up()
            cpu_before = cpu_seconds()
            for batch in range(2):
                sources = [kernel(batch * jobs + n) for n in range(jobs)]
                at = time.perf_counter()
                results = await e.compile_many([CompileJob(s, pch=True) for s in sources])
                batches.append(time.perf_counter() - at)
                assert all(r.ok for r in results), [str(r.error) for r in results if not r.ok]
                logs += [r.log for r in results]
            cpu = cpu_seconds() - cpu_before
            files, size = _pch_bytes()
            # Every worker replaced (as after a crash, a kill at a timeout, a recycle):
            # the template lives on, and so does what its forks shared.
            for child in psutil.Process().children(recursive=True):
                if child.name().startswith("acw-nvrtc"):
                    child.kill()
            at = time.perf_counter()
            (after,) = await e.compile_many([CompileJob(kernel(2 * jobs), pch=True)])
            replaced = time.perf_counter() - at
            assert after.ok, str(after.error)
            logs.append(after.log)
        return {
            "mode": mode,
            "batches_s": batches,
            "replaced_worker_s": replaced,
            "workers_cpu_s": cpu,
            "made": sum("creating precompiled header" in log for log in logs),
            "used": sum("using precompiled header" in log for log in logs),
            "pch_files": files,
            "pch_bytes": size,
        }

    return anyio.run(run)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--jobs", type=int, default=0, help="per batch (0: 4 per worker)")
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--mode", choices=("shared", "private"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    jobs = args.jobs or 4 * args.workers
    if args.mode is not None:
        print(json.dumps(_trial(args.workers, jobs, args.arch, args.mode)))
        return 0
    print(f"{args.workers} NVRTC workers, 2 batches of {jobs} kernels with one header prefix")
    trials = []
    for number in range(args.pairs):
        order = ("shared", "private") if number % 2 == 0 else ("private", "shared")
        for mode in order:
            command = ["--workers", str(args.workers), "--jobs", str(jobs), "--arch", args.arch]
            trial = fresh_trial("benchmarks.compile.shared_pch", [*command, "--mode", mode])
            if trial is None:
                return 1
            trials.append(trial)
            first, second = trial["batches_s"]
            print(
                f"{mode:>7}: first batch {first:.2f} s, second {second:.2f} s, one job on a "
                f"new worker {trial['replaced_worker_s']:.2f} s; workers' CPU "
                f"{trial['workers_cpu_s']:.1f} s; PCH made {trial['made']}, used "
                f"{trial['used']}; {trial['pch_files']} files, "
                f"{trial['pch_bytes'] / 2**20:.0f} MiB on disk",
                flush=True,
            )
    for mode in ("shared", "private"):
        mine = [t for t in trials if t["mode"] == mode]
        print(
            f"{mode:>7}, median: first batch "
            f"{statistics.median(t['batches_s'][0] for t in mine):.2f} s, second "
            f"{statistics.median(t['batches_s'][1] for t in mine):.2f} s, one job on a new "
            f"worker {statistics.median(t['replaced_worker_s'] for t in mine):.2f} s, workers' CPU "
            f"{statistics.median(t['workers_cpu_s'] for t in mine):.1f} s"
        )
    if args.json is not None:
        args.json.write_text(
            json.dumps({"workers": args.workers, "jobs": jobs, "trials": trials}, indent=2)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
