"""Hit latency of the compile cache: the tiers alone, and a one-job cache hit end to end,
in process and through the compile server, side by side in one run.

The tiers: puts one entry (a random binary of --size bytes, a short log, small metadata)
and times --n gets of it, after a warm-up, so the disk numbers are for a warm page
cache: open, read, verify (sha256 over the whole entry), and the occasional mtime
refresh. Also times DiskCache.put and a miss, for scale.

End to end (``--calls``, 0 to skip): ``await engine.compile(job)`` of one small kernel
already in the memory tier, timed call by call, as a TVM callback makes them: an
``Engine()`` in this process, then an ``Engine(server=...)`` on a compile server started
for the run (its own folder and cache folder, stopped after). Both compile the kernel
once first (NVRTC threads in process; the server's NVRTC worker), then time the hits.

Prints median (p50) and p99 per operation.

    python -m benchmarks.cache.hit_latency [--size 100000] [--n 1000] [--dir PATH] [--calls 2000]

Use --dir to measure a particular filesystem (an NFS home, a tmpfs).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio

from asynccomp import CompileJob, Engine
from asynccomp.cache import CacheEntry, DiskCache, MemoryCache
from asynccomp.server import server_paths

KERNEL = r"""
extern "C" __global__ void scale(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.0f;
}
"""


def measure(op: Callable[[], object], n: int) -> list[float]:
    """Microseconds per call, for n calls after a short warm-up."""
    for _ in range(min(50, n)):
        op()
    samples = []
    for _ in range(n):
        start = time.perf_counter_ns()
        op()
        samples.append((time.perf_counter_ns() - start) / 1000)
    return samples


def row(name: str, samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"{name:<34} {statistics.median(ordered):>10.1f} {p99:>10.1f} {len(ordered):>7}"


def cpu_seconds(pid: int | None) -> float:
    """CPU seconds used so far by this process (``None``) or by process ``pid``."""
    if pid is None:
        return time.process_time()
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def engine_hits(
    calls: int, cpu: list[float], server_pid: int | None = None, **engine: object
) -> list[float]:
    """Microseconds per ``compile`` of one job the cache holds (compiled once first);
    appends to ``cpu`` the CPU microseconds per call of this process and, with
    ``server_pid``, of the server."""
    job = CompileJob(KERNEL, name="scale", arch="sm_90a")
    async with Engine(**engine) as running:  # type: ignore[arg-type]
        first = await running.compile(job)
        assert first.ok, first.error
        for _ in range(min(100, calls)):  # warm-up
            assert (await running.compile(job)).cached
        samples = []
        mine, theirs = cpu_seconds(None), cpu_seconds(server_pid) if server_pid else 0.0
        for _ in range(calls):
            start = time.perf_counter_ns()
            result = await running.compile(job)
            samples.append((time.perf_counter_ns() - start) / 1000)
            assert result.cached
        cpu.append((cpu_seconds(None) - mine) / calls * 1e6)
        if server_pid:
            cpu.append((cpu_seconds(server_pid) - theirs) / calls * 1e6)
    return samples


@contextmanager
def compile_server(folder: Path) -> Iterator[tuple[Path, int]]:
    """A compile server of its own in ``folder`` (cache folder there too); its socket
    and pid."""
    socket_path = server_paths(folder).socket
    env = {**os.environ, "ASYNCCOMP_CACHE_DIR": str(folder / "cache")}
    env.pop("ASYNCCOMP_REMOTE_CACHE", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "asynccomp", "serve", "--server-dir", str(folder)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not _listening(socket_path):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the compile server did not start")
            time.sleep(0.05)
        yield socket_path, process.pid
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _listening(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
    return True


def end_to_end(calls: int) -> list[tuple[str, list[float]]]:
    here: list[float] = []
    there: list[float] = []
    with tempfile.TemporaryDirectory(prefix="achl-", dir="/tmp") as folder:
        root = Path(folder)
        root.chmod(0o700)
        in_process = anyio.run(
            lambda: engine_hits(calls, here, cache_dir=str(root / "local"), nvrtc_mode="threads")
        )
        with compile_server(root) as (path, pid):
            served = anyio.run(lambda: engine_hits(calls, there, pid, server=str(path)))
    print(
        f"CPU per hit: in process {here[0]:.0f} µs; through the server {there[0]:.0f} µs "
        f"(client) + {there[1]:.0f} µs (server) = {there[0] + there[1]:.0f} µs"
    )
    return [
        ("Engine.compile (hit, in process)", in_process),
        ("Engine.compile (hit, server)", served),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000, help="binary size in bytes")
    parser.add_argument("--n", type=int, default=1000, help="timed calls per operation")
    parser.add_argument("--dir", type=Path, default=None, help="cache root (default: a temp dir)")
    parser.add_argument(
        "--calls", type=int, default=2000, help="timed one-job hits per engine (0: skip)"
    )
    args = parser.parse_args()

    entry = CacheEntry(
        binary=os.urandom(args.size),
        log="ptxas info    : Used 40 registers, 384 bytes cmem[0]\n" * 4,
        metadata={"backend": "nvrtc", "output": "cubin", "arch": "sm_90a", "elapsed": 0.31},
    )
    key = hashlib.sha256(b"benchmark").hexdigest()
    missing = hashlib.sha256(b"missing").hexdigest()

    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        memory = MemoryCache()
        memory.put(key, entry)
        disk = DiskCache(Path(folder))
        disk.put(key, entry)
        assert disk.get(key) == entry

        put_keys = iter([hashlib.sha256(b"%d" % i).hexdigest() for i in range(args.n + 50)])
        results = [
            ("MemoryCache.get (hit)", measure(lambda: memory.get(key), args.n)),
            ("DiskCache.get (hit)", measure(lambda: disk.get(key), args.n)),
            ("DiskCache.get (miss)", measure(lambda: disk.get(missing), args.n)),
            ("DiskCache.put", measure(lambda: disk.put(next(put_keys), entry), args.n)),
        ]
        filesystem = folder

    print(f"entry: {args.size} bytes binary; cache folder: {filesystem}")
    if args.calls > 0:
        results += end_to_end(args.calls)
    print(f"{'operation':<34} {'p50 µs':>10} {'p99 µs':>10} {'calls':>7}")
    for name, samples in results:
        print(row(name, samples))


if __name__ == "__main__":
    main()
