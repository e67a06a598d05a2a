"""How long a cache hit takes in each tier: memory, disk, and Redis on localhost.

The kernels (the built-in examples, or ``--corpus``) are compiled once by an engine with
a disk cache and a Redis remote tier (a ``redis-server`` this script starts on a free
port). Then each kernel is asked for ``--hits`` times: from the same engine (memory
hits), from a new engine on the same folder (disk hits: its memory tier starts empty),
and from a new engine on an empty folder with the same Redis (remote hits). The time is
``await engine.compile(job)`` as a caller sees it; medians and p99 in milliseconds.

Remote entries are authenticated as in production (an HMAC-SHA256 over each entry, see
``asynccomp.cache.RemoteAuth``): with ``$ASYNCCOMP_REMOTE_CACHE_KEY`` or
``$ASYNCCOMP_REMOTE_CACHE_KEY_FILE`` when set, else with a random key for this run.

    python -m benchmarks.cache.tiers
    python -m benchmarks.cache.tiers --corpus corpus --hits 3
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import anyio

from asynccomp import CompileJob, Engine
from asynccomp.cache import REMOTE_CACHE_KEY_ENV, RemoteAuth
from benchmarks._corpus import add_corpus_argument, corpus_files


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _summary(seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return f"median {statistics.median(ms):7.3f} ms   p99 {p99:7.3f} ms   ({len(ms)} hits)"


async def _timed(engine: Engine, jobs: list[CompileJob], hits: int) -> list[float]:
    times = []
    for _ in range(hits):
        for job in jobs:
            started = time.perf_counter()
            result = await engine.compile(job)
            times.append(time.perf_counter() - started)
            assert result.cached, result.error
    return times


async def measure(jobs: list[CompileJob], url: str, folder: Path, hits: int) -> dict[str, str]:
    out = {}
    async with Engine(arch="sm_90a", cache_dir=folder / "a", remote_cache=url) as engine:
        await engine.compile_many(jobs)
        out["memory"] = _summary(await _timed(engine, jobs, hits))
    disk = []
    for _ in range(hits):  # a new engine each round: its memory tier starts empty
        async with Engine(arch="sm_90a", cache_dir=folder / "a", remote_cache=False) as engine:
            disk += await _timed(engine, jobs, 1)
    out["disk"] = _summary(disk)
    remote = []
    for round_ in range(hits):  # an empty local folder each round: every hit is remote
        local = folder / f"empty{round_}"
        async with Engine(arch="sm_90a", cache_dir=local, remote_cache=url) as engine:
            remote += await _timed(engine, jobs, 1)
    out["redis (localhost)"] = _summary(remote)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_argument(parser)
    parser.add_argument("--hits", type=int, default=5)
    args = parser.parse_args(argv)
    files = corpus_files(args.corpus)
    jobs = [CompileJob(f.read_text(), name=f.stem) for f in files]
    auth = RemoteAuth.from_environment()
    if auth is None:
        os.environ[REMOTE_CACHE_KEY_ENV] = secrets.token_hex(32)
        auth = RemoteAuth.from_environment()
    assert auth is not None
    binary = shutil.which("redis-server")
    if binary is None:
        print("redis-server is not installed (apt-get install redis-server)", file=sys.stderr)
        return 2
    port = _free_port()
    folder = Path(tempfile.mkdtemp(prefix="tiers-"))
    server = subprocess.Popen(
        [binary, "--port", str(port), "--save", "", "--appendonly", "no", "--dir", str(folder)],
        stdout=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.5)
        sizes = sorted(len(j.source) for j in jobs)
        print(
            f"{len(jobs)} kernels ({sizes[0]}-{sizes[-1]} bytes of source), {args.hits} hits each; "
            f"remote entries authenticated (HMAC-SHA256, key id {auth.key_id}, {auth.source})"
        )
        for tier, line in anyio.run(
            measure, jobs, f"redis://127.0.0.1:{port}/0", folder, args.hits
        ).items():
            print(f"{tier:<18} {line}")
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
