"""``asynccomp bench``: how fast does a corpus compile, configuration by configuration?

A thin layer over :mod:`asynccomp.bench`: it parses the lists given on the command line,
shows progress on stderr, prints the table on stdout and writes the JSON and the plot.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import anyio

from .. import bench
from ..engine import default_workers
from ._args import arch, int_list, non_negative_int, on_off_list, positive_int, word_list

DESCRIPTION = """\
Compile a corpus of .cu files (default: the built-in examples) in several configurations
and compare them:

  tvm        the baseline: what TVM's tvm_callback_cuda_compile does, one kernel at a
             time in this process, NVRTC, original source (measured in the same run)
  threads    the engine's NVRTC in threads of this process, at each --workers count
  processes  the engine's NVRTC in long-lived worker processes, at each --workers count
  nvcc       the engine's nvcc backend (fatbin), at each --workers count

threads and processes run once per --fast-path setting (the TVM preamble fast path).
Every configuration gets its own engine (no cache), is warmed up (--warmup untimed
passes; the first pass of a fresh engine is reported as "cold"), and then runs --repeat
timed passes; the order of configurations is reversed on every other round, and the
table shows medians. Progress goes to stderr, the table to stdout.

Example:
  asynccomp bench --configs tvm,processes --workers 1,2 --limit 6 --json bench.json

Exit status: 0, 1 when a kernel failed to compile, 2 for a usage error."""


def _default_workers() -> list[int]:
    cpus = default_workers()
    counts = [1 << i for i in range(cpus.bit_length()) if 1 << i <= cpus]
    return sorted({*counts, cpus})


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "bench",
        help="measure how fast a corpus compiles, configuration by configuration",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--corpus",
        type=Path,
        default=None,
        metavar="DIR",
        help="folder searched for .cu files (default: the built-in examples)",
    )
    p.add_argument(
        "--limit", type=positive_int, default=None, metavar="N", help="only the first N kernels"
    )
    p.add_argument(
        "--configs",
        type=word_list,
        default=["tvm", "threads", "processes"],
        metavar="LIST",
        help="comma-separated, from tvm, threads, processes, nvcc (default: tvm,threads,processes)",
    )
    p.add_argument(
        "--workers",
        type=int_list,
        default=None,
        metavar="LIST",
        help="worker counts, e.g. 1,2,4,8,16 (default: powers of two up to the CPU count, "
        f"here {','.join(map(str, _default_workers()))})",
    )
    p.add_argument(
        "--fast-path",
        type=on_off_list,
        default=[True],
        metavar="on,off",
        help="the engine's TVM preamble fast path for threads/processes (default: on)",
    )
    p.add_argument("--arch", type=arch, default="sm_90a", help="default: sm_90a (no GPU needed)")
    p.add_argument(
        "--style",
        choices=bench.STYLES,
        default="tvm",
        help="tvm (default): every configuration compiles each kernel exactly as TVM 0.27 "
        "would (its source rewrite and options); plain: the files as they are",
    )
    p.add_argument(
        "--repeat", type=positive_int, default=3, metavar="N", help="timed passes (default: 3)"
    )
    p.add_argument(
        "--warmup",
        type=non_negative_int,
        default=1,
        metavar="N",
        help="untimed passes first (default: 1)",
    )
    p.add_argument("--json", type=Path, default=None, metavar="FILE", help="write the results here")
    p.add_argument(
        "--plot",
        type=Path,
        default=None,
        metavar="FILE",
        help="write a PNG of speedup against workers here (needs matplotlib)",
    )
    p.set_defaults(run=run)


class _Progress:
    """Progress on stderr: a live counter on a terminal, else a line per pass (and one
    every ``every`` seconds inside a long pass)."""

    def __init__(self, stream: TextIO, live: bool, every: float = 15.0) -> None:
        self.stream = stream
        self.live = live
        self.every = every
        self._last = 0.0

    def __call__(self, event: bench.Progress) -> None:
        phase = f"{event.phase} {event.number}/{event.passes}" + (" (cold)" if event.cold else "")
        what = f"bench: [{event.index}/{event.configs}] {event.config.label:<24} {phase:<17}"
        now = time.monotonic()
        if event.seconds is not None:
            line = f"{what} {event.seconds:8.2f} s"
            self.stream.write(("\r" + line.ljust(79) if self.live else line) + "\n")
        elif self.live:
            self.stream.write(f"\r{what} {event.done}/{event.total}")
        elif event.done == 0:
            self._last = now
            return
        elif now - self._last >= self.every and event.done < event.total:
            self._last = now
            self.stream.write(f"{what} {event.done}/{event.total} ...\n")
        self.stream.flush()


def _error(message: str) -> int:
    print(f"asynccomp: error: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    try:
        workers = args.workers or _default_workers()
        configs = bench.expand_configs(args.configs, workers, args.fast_path)
        settings = bench.BenchSettings(
            configs, arch=args.arch, style=args.style, repeat=args.repeat, warmup=args.warmup
        )
        kernels = bench.load_corpus(args.corpus, args.limit)
    except bench.BenchError as exc:
        return _error(str(exc))
    if args.plot is not None and not bench.plot_available():
        return _error("--plot needs matplotlib: pip install matplotlib")
    for path in (args.json, args.plot):
        if path is not None and not path.parent.is_dir():
            return _error(f"no such folder for {path}: {path.parent}")
    if not bench.memory_sampling_available():
        print(
            "bench: psutil is not installed, so peak memory is not measured (pip install psutil)",
            file=sys.stderr,
        )
    print(
        f"bench: {len(kernels)} kernels, {len(configs)} configurations, "
        f"{settings.warmup} warm-up + {settings.repeat} timed passes each",
        file=sys.stderr,
    )
    progress = _Progress(sys.stderr, live=sys.stderr.isatty())
    # Asked before any engine starts, so the CUDA driver this loads weighs on the memory
    # of every configuration alike.
    machine = bench.machine_info()

    def write_json(measured: bench.BenchRun) -> None:
        if args.json is not None:
            stats = bench.summarize(measured.runs, len(measured.kernels))
            document = bench.report_json(measured, stats, args.command_line, machine)
            args.json.write_text(json.dumps(document, indent=2) + "\n")

    # The JSON is also written after every timed round: a long run that is stopped
    # keeps what it measured.
    result = anyio.run(bench.run_bench, kernels, settings, progress, write_json)
    stats = bench.summarize(result.runs, len(result.kernels))
    print(bench.format_table(result, stats))
    write_json(result)
    if args.plot is not None:
        bench.write_plot(result, stats, args.plot)
    failed = False
    for run_ in result.runs:
        failures = {name: error for p in run_.passes for name, error in p.failures}
        for name, error in list(failures.items())[:3]:
            print(f"\n--- {run_.config.label}: {name}: {error}", file=sys.stderr)
        if len(failures) > 3:
            print(f"(and {len(failures) - 3} more in {run_.config.label})", file=sys.stderr)
        failed = failed or bool(failures)
    return 1 if failed else 0
