"""MetaSchedule's builder, as it compiles: fresh worker pools per batch, one callback call
per candidate. How long does a batch take with TVM's own callback, with asynccomp
(``initializer=asynccomp.tvm.register``: the facade, on the compile server), and with
one in-process engine? And with a callback that does nothing (the pool's own floor)?

Exactly as ``LocalBuilder.build`` uses TVM's ``PopenPoolExecutor``: a fresh pool of
``--workers`` processes for every batch, the initializer, one ``submit`` per candidate,
TVM's 30 s per-build timeout. Each batch compiles fresh candidates (the corpus with a
comment that names the batch), so no cache answers; every configuration starts cold
(asynccomp: a new server with an empty cache). Peak processes and memory are sampled
over this process's tree and the server's. Without TVM installed the standard library's
process pool (spawn) stands in for ``PopenPoolExecutor`` and the ``tvm`` configuration
is skipped.

    python -m benchmarks.tuners.ms_callbacks --smallest 6 --batches 2          # 2-core machine
    python -m benchmarks.tuners.ms_callbacks --corpus corpus --batches 3
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks._corpus import add_corpus_argument, corpus_files

ARCH = "sm_90a"
TIMEOUT = 30.0  # LocalBuilder's default timeout_sec


# -- what runs in a builder worker -----------------------------------------------------


def init_tvm() -> None:
    import tvm  # noqa: F401 - registers TVM's own tvm_callback_cuda_compile


def init_noop() -> None:
    import tvm_ffi

    def nothing(code: str, target: object = None) -> bytearray:
        return bytearray(b"\x7fELF")

    tvm_ffi.register_global_func("tvm_callback_cuda_compile", nothing, override=True)


def init_asynccomp() -> None:
    import asynccomp.tvm

    asynccomp.tvm.register()  # the documented line: LocalBuilder(initializer=...)


def build(source: str) -> int:
    """One candidate: what a builder worker's build does with the CUDA code."""
    import tvm_ffi

    callback = tvm_ffi.get_global_func("tvm_callback_cuda_compile")
    try:
        import tvm

        scope = tvm.target.Target({"kind": "cuda", "arch": ARCH})  # TVM lowers in one
    except Exception:  # no TVM, or a runtime-only one: no target scope ($ASYNCCOMP_ARCH)
        return len(callback(source))
    with scope:
        return len(callback(source))


INITIALIZERS: dict[str, Callable[[], None]] = {
    "tvm": init_tvm,
    "noop": init_noop,
    "asynccomp": init_asynccomp,
}


# -- measuring -----------------------------------------------------------------------------


class Sampler:
    """Peak process count and RSS of this process's tree and the server's."""

    def __init__(self, server_pid: Callable[[], int | None], own_workers: bool) -> None:
        import psutil

        self.psutil = psutil
        self.own_workers = own_workers
        self.server_pid = server_pid
        self.processes = 0
        self.rss = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _tree(self) -> list[Any]:
        # This process and its pool workers (not the idle NVRTC workers the "engine"
        # configuration keeps in this process), and the server with its workers.
        me = self.psutil.Process()
        roots = [me]
        pid = self.server_pid()
        if pid is not None:
            try:
                roots.append(self.psutil.Process(pid))
            except self.psutil.NoSuchProcess:
                pass
        found = []
        for root in roots:
            try:
                found += [root, *root.children(recursive=True)]
            except self.psutil.NoSuchProcess:
                pass
        if not self.own_workers:
            engine = set()
            for child in me.children():
                try:
                    if child.name() == "acw-nvrtc":
                        engine.add(child.pid)
                except self.psutil.Error:  # gone, or a zombie
                    pass
            found = [p for p in found if p.pid not in engine]
        return found

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            rss, count = 0, 0
            for p in self._tree():
                try:
                    rss += p.memory_info().rss
                    count += 1
                except self.psutil.NoSuchProcess:
                    pass
            self.processes = max(self.processes, count)
            self.rss = max(self.rss, rss)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def make_pool(workers: int, initializer: Callable[[], None]) -> Any:
    try:
        from tvm.support.popen_pool import PopenPoolExecutor
    except ImportError:
        return concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn"), initializer=initializer
        )
    return PopenPoolExecutor(max_workers=workers, timeout=TIMEOUT, initializer=initializer)


def run_pool_batch(workers: int, config: str, sources: Sequence[str]) -> dict[str, Any]:
    started = time.perf_counter()
    pool = make_pool(workers, INITIALIZERS[config])
    try:
        futures = [pool.submit(build, source) for source in sources]
        failures = []
        for future in futures:
            try:
                if future.result(timeout=TIMEOUT * len(sources)) <= 0:
                    failures.append("empty binary")
            except Exception as exc:  # TVM's pool raises TimeoutError for a slow build
                failures.append(f"{type(exc).__name__}: {exc}"[:200])
    finally:
        pool.shutdown()
    return {"wall": time.perf_counter() - started, "failures": failures}


def run_engine_batch(engine: Any, sources: Sequence[str]) -> dict[str, Any]:
    from asynccomp.tvm import make_job

    started = time.perf_counter()
    results = engine.compile_many([make_job(s, arch=ARCH) for s in sources])
    failures = [str(r.error)[:200] for r in results if not r.ok]
    return {"wall": time.perf_counter() - started, "failures": failures}


def fresh(sources: Sequence[str], config: str, batch: int) -> list[str]:
    return [f"{s}\n// builder batch {batch} of {config}\n" for s in sources]


class Config:
    """One configuration's state across batches: its server folder, or its engine."""

    def __init__(self, name: str, workers: int) -> None:
        from asynccomp import SyncEngine

        self.name = name
        self.workers = workers
        self.work = Path(tempfile.mkdtemp(prefix="acb-"))
        (self.work / "server").mkdir(mode=0o700)
        self.engine = (
            SyncEngine(arch=ARCH, nvrtc_workers=workers, cache_dir=self.work / "cache")
            if name == "engine"
            else None
        )
        if self.engine is not None:
            self.engine.start()

    def environ(self) -> None:
        # What the pool's workers (and the server one of them starts) inherit.
        os.environ["ASYNCCOMP_SERVER_DIR"] = str(self.work / "server")
        os.environ["ASYNCCOMP_CACHE_DIR"] = str(self.work / "cache")
        os.environ["ASYNCCOMP_SERVER"] = "auto"
        os.environ["ASYNCCOMP_ARCH"] = ARCH

    def server_pid(self) -> int | None:
        from asynccomp.server import server_paths

        try:
            return int(server_paths(self.work / "server").lock.read_text().strip())
        except (OSError, ValueError):
            return None

    def run(self, batch: int, sources: Sequence[str]) -> dict[str, Any]:
        self.environ()
        candidates = fresh(sources, self.name, batch)
        with Sampler(self.server_pid, own_workers=self.engine is not None) as sampler:
            if self.engine is not None:
                row = run_engine_batch(self.engine, candidates)
            else:
                row = run_pool_batch(self.workers, self.name, candidates)
        row.update(
            config=self.name,
            batch=batch,
            peak_processes=sampler.processes,
            peak_mib=round(sampler.rss / 2**20),
        )
        return row

    def close(self) -> None:
        from asynccomp import server
        from asynccomp.server import server_paths

        if self.engine is not None:
            self.engine.close()
        server.stop(server_paths(self.work / "server").socket)
        shutil.rmtree(self.work, ignore_errors=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_argument(parser)
    parser.add_argument("--smallest", type=int, default=None, help="only the N smallest")
    parser.add_argument("--batches", type=int, default=2)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--configs", default="noop,tvm,asynccomp,engine")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    files = corpus_files(args.corpus)
    if args.smallest:
        files = sorted(files, key=lambda f: f.stat().st_size)[: args.smallest]
    sources = [f.read_text() for f in files]
    # TVM finds CUDA through `which nvcc`; a wrapper script at /usr/local/bin/nvcc makes it
    # look in /usr/local (see generate_tvm_test_kernels.py). Name the toolkit outright.
    if "CUDA_PATH" not in os.environ and Path("/usr/local/cuda/include").is_dir():
        os.environ["CUDA_PATH"] = "/usr/local/cuda"
    try:
        import tvm  # noqa: F401

        pool_kind = "tvm.support.popen_pool.PopenPoolExecutor"
    except ImportError:
        pool_kind = "ProcessPoolExecutor (spawn), standing in: TVM is not installed"
    configs = [c for c in args.configs.split(",") if c]
    if "tvm" in configs and pool_kind.startswith("ProcessPool"):
        configs.remove("tvm")
    print(
        f"{len(sources)} kernels x {args.batches} batches, {args.workers} pool workers, "
        f"{os.cpu_count()} CPUs, pool: {pool_kind}",
        flush=True,
    )
    states = [Config(name, args.workers) for name in configs]
    rows: list[dict[str, Any]] = []
    try:
        for batch in range(1, args.batches + 1):
            # Each round runs every configuration once, in a rotated order.
            order = states[batch % len(states) :] + states[: batch % len(states)]
            for state in order:
                row = state.run(batch, sources)
                rows.append(row)
                print(
                    f"{row['config']:<10} batch {batch}: {row['wall']:7.2f} s, "
                    f"{len(row['failures'])} failed, peak {row['peak_processes']} processes, "
                    f"{row['peak_mib']} MiB",
                    flush=True,
                )
                for failure in row["failures"][:3]:
                    print(f"    {failure}", flush=True)
    finally:
        for state in states:
            state.close()
    walls: dict[str, list[float]] = {
        c: [r["wall"] for r in rows if r["config"] == c] for c in configs
    }
    print()
    print(f"{'':<10} {'batch 1':>9} {'later (median)':>15}  peak processes  peak MiB")
    for config in configs:
        later_median = (
            statistics.median(walls[config][1:]) if len(walls[config]) > 1 else float("nan")
        )
        mine = [r for r in rows if r["config"] == config]
        print(
            f"{config:<10} {walls[config][0]:8.2f}s {later_median:14.2f}s  "
            f"{max(r['peak_processes'] for r in mine):>14}  {max(r['peak_mib'] for r in mine):>8}"
        )
    if {"noop", "asynccomp", "engine"} <= set(configs) and args.batches > 1:

        def later(name: str) -> float:
            return statistics.median(walls[name][1:])

        part = later("asynccomp") - later("noop")
        first = walls["asynccomp"][0] - walls["noop"][0]
        print(
            f"asynccomp's compile part (its wall minus the pool's floor): batch 1 {first:.2f} s "
            f"(engine {walls['engine'][0]:.2f} s: {first / walls['engine'][0]:.2f}x), later "
            f"{part:.2f} s (engine {later('engine'):.2f} s: {part / later('engine'):.2f}x)"
        )
    if args.json is not None:
        args.json.write_text(json.dumps({"pool": pool_kind, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
