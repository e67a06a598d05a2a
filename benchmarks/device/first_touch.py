"""How long a machine takes to give its processes memory, and disk, for the first time.

    python3 benchmarks/device/first_touch.py [--processes 16] [--mib 1024] [--passes 2]
        [--disk-mib 0]

Each pass starts ``--processes`` fresh processes at once; each writes one byte to every
4 KiB page of ``--mib`` MiB of new memory (so the kernel backs every page) and reports
how long that took. On a fresh virtual machine the first pass may be far slower than the
next (memory the host has not yet given the guest); on a machine that has run anything
big before, both are the same. The first batch of a fresh GPU machine (issue 36:
11-21 s against ~1 s in the next process) is measured after this or instead of it.
On the H100 of 2026-12-07 memory was not it: 16 GiB in 0.98 s, then 0.73 s.

``--disk-mib N``: each process then also writes N MiB to a new file in the temporary
folder (where NVRTC's shared precompiled headers go) and syncs it, and removes it at the
end of the pass: a thin-provisioned disk may be slow to write blocks never written.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import tempfile
import time

PAGE = 4096


def touch(mib: int) -> float:
    start = time.perf_counter()
    memory = bytearray(mib << 20)  # calloc: mapped, not yet backed
    memory[::PAGE] = b"\x01" * (len(memory) // PAGE)  # one write per page, in C
    return time.perf_counter() - start


def write(mib: int) -> float:
    """Seconds to write ``mib`` MiB to a new file in the temporary folder and sync it."""
    chunk = os.urandom(1 << 20)
    start = time.perf_counter()
    with tempfile.NamedTemporaryFile(prefix="first-touch-") as file:
        for _ in range(mib):
            file.write(chunk)
        file.flush()
        os.fsync(file.fileno())
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=16)
    parser.add_argument("--mib", type=int, default=1024)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--disk-mib", type=int, default=0)
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")  # fresh processes, as workers are
    for index in range(args.passes):
        start = time.perf_counter()
        with context.Pool(args.processes) as pool:
            seconds = pool.map(touch, [args.mib] * args.processes)
        wall = time.perf_counter() - start
        written = []
        if args.disk_mib:  # fresh processes again, as the compiles' would be
            with context.Pool(args.processes) as pool:
                written = pool.map(write, [args.disk_mib] * args.processes)
        total = args.processes * args.mib / 1024
        report = {
            "pass": index + 1,
            "gib": total,
            "wall_s": round(wall, 3),
            "touch_s_max": round(max(seconds), 3),
            "gib_per_s": round(total / max(seconds), 2),
        }
        if written:
            disk = args.processes * args.disk_mib / 1024
            report.update(disk_gib=disk, write_s_max=round(max(written), 3))
            report.update(disk_gib_per_s=round(disk / max(written), 2))
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
