"""Local workers against the Ray executor on the same machine, and what that says about a
10,000-kernel sweep over N nodes.

Measured, in one process with a Ray instance of this machine's CPUs (``ray.init``, or
``--address`` of a running cluster):

- **batch wall**: the corpus (as TVM 0.27 compiles it, ``asynccomp.tvm.make_job``) as one
  batch, warm, through ``Engine()`` (local NVRTC workers) and through
  ``Engine(executor=RayExecutor())`` (one actor per CPU), best and median of ``--rounds``;
- **per-job overhead**: a tiny kernel compiled one at a time by one local worker and by
  one actor: the difference of the two latencies is what a trip through Ray costs;
- **driver CPU per job**: the engine's process CPU time during the Ray batches, per job
  (the one process every job crosses: it bounds how many jobs a second one driver sends);
- **transfer sizes**: what goes to an actor (the pickled ``PreparedCompile``) and back
  (binary and log) per job.

The projection: a sweep of 10,000 jobs like the corpus's on N nodes of C cores takes about
``max(longest job, 10000 * (mean compile + overhead) / (N * C), 10000 * driver CPU per
job)``, plus the bytes moved over the network (``--bandwidth``, default 1 GB/s).

    python -m benchmarks.compile.ray_executor                              # built-in examples
    python -m benchmarks.compile.ray_executor --corpus corpus --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import secrets
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

from asynccomp import CompileJob, CompileResult, Engine
from asynccomp.backends import BackendOptions, NvrtcBackend
from asynccomp.ray import RayExecutor
from asynccomp.toolkit import find_toolkit
from asynccomp.tvm import make_job
from benchmarks._corpus import add_corpus_argument, corpus_files
from benchmarks._nvrtc_cache import add_nvrtc_cache_argument, apply_nvrtc_cache

RUN = secrets.token_hex(4)
TINY = 'extern "C" __global__ void tiny(float* x) {{ x[threadIdx.x] *= {}f; }}\n'


def corpus_jobs(corpus: Path | None, arch: str) -> list[CompileJob]:
    files = corpus_files(corpus)
    return [make_job(f.read_text(), arch=arch, name=f.stem) for f in files]


async def batches(engine: Engine, jobs: list[CompileJob], rounds: int, name: str) -> dict[str, Any]:
    walls, cpu = [], 0.0
    results: list[CompileResult] = []
    for number in range(rounds):
        # New sources each round and engine (a comment: the same bytes): NVRTC 12.9+
        # keeps a cache of its own in ~/.nv, which would answer a repeated source.
        tag = f"\n// ray_executor {RUN} {name} round {number}\n"
        fresh = [replace(job, source=job.source + tag) for job in jobs]
        cpu_before, started = time.process_time(), time.perf_counter()
        results = await engine.compile_many(fresh)
        walls.append(time.perf_counter() - started)
        cpu += time.process_time() - cpu_before
        failed = [str(r.error) for r in results if not r.ok]
        assert not failed, failed[:3]
    return {
        "wall_best": min(walls),
        "wall_median": statistics.median(walls),
        "walls": walls,
        "driver_cpu_per_job": cpu / (rounds * len(jobs)),
        "job_elapsed_mean": statistics.fmean(r.elapsed for r in results),
        "job_elapsed_max": max(r.elapsed for r in results),
        "binaries": [r.binary for r in results],
    }


async def latency(engine: Engine, count: int) -> float:
    """Median seconds per tiny job compiled one at a time."""
    times = []
    for i in range(count):
        started = time.perf_counter()
        text = TINY.format(1.0 + i) + f"// {RUN} {engine.where}\n"
        result = await engine.compile(CompileJob(text, name=f"tiny{i}"))
        assert result.ok, result.error
        times.append(time.perf_counter() - started)
    return statistics.median(times[2:])  # the first ones load NVRTC's headers


def transfer_sizes(
    jobs: list[CompileJob], results: list[bytes | None], arch: str
) -> dict[str, float]:
    backend = NvrtcBackend(find_toolkit())
    sent = [len(pickle.dumps(backend.prepare(j, BackendOptions(arch)))) for j in jobs]
    back = [len(b or b"") for b in results]
    return {
        "sent_mean": statistics.fmean(sent),
        "sent_max": max(sent),
        "back_mean": statistics.fmean(back),
        "back_max": max(back),
    }


def projection(
    measured: dict[str, Any], cores: int, bandwidth: float, kernels: int = 10_000
) -> list[dict[str, float]]:
    compile_s = measured["local"]["job_elapsed_mean"]
    overhead = max(0.0, measured["overhead_per_job"])
    driver = measured["ray"]["driver_cpu_per_job"]
    size = measured["transfer"]["sent_mean"] + measured["transfer"]["back_mean"]
    longest = measured["local"]["job_elapsed_max"]
    rows = []
    for nodes in (1, 2, 4, 8, 16, 32, 64):
        compute = kernels * (compile_s + overhead) / (nodes * cores)
        rows.append(
            {
                "nodes": nodes,
                "compute_bound_s": compute,
                "driver_bound_s": kernels * driver,
                "network_s": kernels * size / bandwidth,
                "projected_s": max(longest, compute, kernels * driver) + kernels * size / bandwidth,
            }
        )
    return rows


async def main(args: argparse.Namespace) -> dict[str, Any]:
    jobs = corpus_jobs(args.corpus, args.arch)  # a missing corpus says so first
    import ray

    cores = os.cpu_count() or 1
    started = time.perf_counter()
    if args.address is None:
        ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False)
    else:
        ray.init(address=args.address, log_to_driver=False)
    ray_start = time.perf_counter() - started
    out: dict[str, Any] = {"kernels": len(jobs), "cores": cores, "ray_init_s": ray_start}

    async with Engine(arch=args.arch, cache=False) as local:
        await local.warm_up()
        out["local"] = await batches(local, jobs, args.rounds, "local")
    async with Engine(arch=args.arch, cache=False, nvrtc_workers=1) as one:
        out["local_latency"] = await latency(one, args.tiny)

    started = time.perf_counter()
    async with Engine(arch=args.arch, cache=False, executor=RayExecutor()) as remote:
        out["ray_engine_start_s"] = time.perf_counter() - started
        out["actors"] = remote.statistics().workers
        await remote.warm_up()
        out["ray"] = await batches(remote, jobs, args.rounds, "ray")
    async with Engine(arch=args.arch, cache=False, executor=RayExecutor(actors=1)) as single:
        out["ray_latency"] = await latency(single, args.tiny)
    out["overhead_per_job"] = out["ray_latency"] - out["local_latency"]
    out["same_bytes"] = out["local"].pop("binaries") == (ray_bins := out["ray"].pop("binaries"))
    out["transfer"] = transfer_sizes(jobs, ray_bins, args.arch)
    out["projected_cores"] = args.cores or cores
    out["projection"] = projection(out, out["projected_cores"], args.bandwidth)
    ray.shutdown()
    return out


def report(out: dict[str, Any]) -> str:
    lines = [
        f"{out['kernels']} kernels, {out['cores']} cores, {out['actors']} actors; "
        f"ray.init {out['ray_init_s']:.1f} s, Ray engine start {out['ray_engine_start_s']:.2f} s",
        f"batch wall   local {out['local']['wall_best']:.2f} s (median "
        f"{out['local']['wall_median']:.2f})   Ray {out['ray']['wall_best']:.2f} s (median "
        f"{out['ray']['wall_median']:.2f})   same bytes: {out['same_bytes']}",
        f"tiny job     local {out['local_latency'] * 1e3:.1f} ms   Ray "
        f"{out['ray_latency'] * 1e3:.1f} ms   overhead {out['overhead_per_job'] * 1e3:.1f} ms/job",
        f"driver CPU   {out['ray']['driver_cpu_per_job'] * 1e3:.2f} ms/job (Ray) vs "
        f"{out['local']['driver_cpu_per_job'] * 1e3:.2f} (local)",
        f"transfer     sent {out['transfer']['sent_mean'] / 1e3:.1f} kB/job (max "
        f"{out['transfer']['sent_max'] / 1e3:.1f}), back {out['transfer']['back_mean'] / 1e3:.1f} "
        f"kB/job (max {out['transfer']['back_max'] / 1e3:.1f})",
        f"10,000 kernels like these over N nodes of {out['projected_cores']} cores:",
        "  nodes  compute-bound  driver-bound  network  projected",
    ]
    for row in out["projection"]:
        lines.append(
            f"  {row['nodes']:5d}  {row['compute_bound_s']:11.1f} s  "
            f"{row['driver_bound_s']:10.1f} s  {row['network_s']:5.1f} s  "
            f"{row['projected_s']:7.1f} s"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_argument(parser)
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tiny", type=int, default=30, help="tiny jobs for the latency")
    parser.add_argument("--address", default=None, help="a running cluster (default: ray.init)")
    parser.add_argument("--cores", type=int, default=None, help="cores per node projected")
    parser.add_argument("--bandwidth", type=float, default=1e9, help="bytes/s, projection")
    parser.add_argument("--json", type=Path, default=None)
    add_nvrtc_cache_argument(parser)
    arguments = parser.parse_args()
    # Before ray.init: a local cluster's actors inherit it (a running one's, --address,
    # have their own environment).
    apply_nvrtc_cache(arguments)
    measured = anyio.run(main, arguments)
    print(report(measured))
    if arguments.json is not None:
        arguments.json.write_text(json.dumps(measured, indent=2))
