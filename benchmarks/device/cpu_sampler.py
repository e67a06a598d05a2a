"""A fixed piece of CPU work, timed again and again: is the machine itself slow for a
while after it boots (issue 36: a fresh GPU machine's first batch takes 12-21 s, its
compiles using 4x the CPU seconds of the same compiles a minute later)?

    python3 benchmarks/device/cpu_sampler.py --seconds 120 > samples.txt

Each line: the machine's uptime (s), the milliseconds of a fixed pure-Python loop, and the
milliseconds to fill 32 MiB of new memory (fresh pages each time, given back after). If
the loop is slow in the first seconds after boot and fast later, with nothing else
running, the machine (its host) is slow, not the compiles; if the loop stays fast while
the compiles are slow, the compiles are.
"""

from __future__ import annotations

import argparse
import mmap
import time


def _uptime() -> float:
    with open("/proc/uptime") as f:
        return float(f.read().split()[0])


def _loop() -> float:
    began = time.perf_counter()
    total = 0
    for i in range(200_000):
        total += i * i
    return (time.perf_counter() - began) * 1000


def _memory(mib: int = 32) -> float:
    began = time.perf_counter()
    area = mmap.mmap(-1, mib << 20)
    for offset in range(0, mib << 20, 4096):
        area[offset] = 1
    area.close()
    return (time.perf_counter() - began) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--every", type=float, default=0.25)
    args = parser.parse_args()
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        print(f"{_uptime():.2f} {_loop():.1f} {_memory():.1f}", flush=True)
        time.sleep(args.every)


if __name__ == "__main__":
    main()
