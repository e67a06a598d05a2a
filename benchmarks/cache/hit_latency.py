"""Hit latency of the compile cache: MemoryCache.get and DiskCache.get.

Puts one entry (a random binary of --size bytes, a short log, small metadata) and times
--n gets of it, after a warm-up, so the disk numbers are for a warm page cache: open,
read, verify (sha256 over the whole entry), and the occasional mtime refresh. Also
times DiskCache.put and a miss, for scale. Prints median and p99 per operation.

    python -m benchmarks.cache.hit_latency [--size 100000] [--n 1000] [--dir PATH]

Use --dir to measure a particular filesystem (an NFS home, a tmpfs).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from asynccomp.cache import CacheEntry, DiskCache, MemoryCache


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
    return f"{name:<22} {statistics.median(ordered):>10.1f} {p99:>10.1f} {len(ordered):>7}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000, help="binary size in bytes")
    parser.add_argument("--n", type=int, default=1000, help="timed calls per operation")
    parser.add_argument("--dir", type=Path, default=None, help="cache root (default: a temp dir)")
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
    print(f"{'operation':<22} {'median µs':>10} {'p99 µs':>10} {'calls':>7}")
    for name, samples in results:
        print(row(name, samples))


if __name__ == "__main__":
    main()
