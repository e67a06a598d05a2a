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
from .._perms import umask_of, write_new
from ..engine import default_workers
from ._args import add_umask, arch, int_list, non_negative_int, on_off_list, positive_int, word_list

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
table shows medians. Progress goes to stderr, the table to stdout, with a forecast of
how long the run takes after its first pass (rough: every configuration is assumed to
be as fast per worker as the first), and a closer one once every configuration has run
a pass.

NVRTC's own cache (in ~/.nv, on machines with a CUDA driver) answers a source that
differs from one it compiled before only by a comment, as each pass's sources do: it is
off for the run (CUDA_CACHE_DISABLE=1) unless --nvrtc-cache on.

The baseline compiles one kernel at a time, so it takes as long as the corpus takes on
one core, once per pass: on a small machine a large corpus takes minutes (--limit,
--repeat and --warmup shorten it). More workers than CPUs only take turns: the ideal
and the efficiency (eff) count min(workers, CPUs).

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
        help=f"comma-separated, from {', '.join(bench.CONFIG_KINDS)} "
        "(default: tvm,threads,processes)",
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
    p.add_argument(
        "--nvrtc-cache",
        choices=("on", "off"),
        default="off",
        help="NVRTC's own cache in ~/.nv (default: off, CUDA_CACHE_DISABLE=1 for the run, "
        "so that every pass compiles; on: as the environment has it)",
    )
    p.add_argument("--json", type=Path, default=None, metavar="FILE", help="write the results here")
    p.add_argument(
        "--plot",
        type=Path,
        default=None,
        metavar="FILE",
        help="write a PNG of speedup against workers here (needs matplotlib)",
    )
    add_umask(p)
    p.set_defaults(run=run)


def _minutes(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min"


def forecast(event: bench.Progress, settings: bench.BenchSettings, cpus: int) -> str:
    """The line printed when the first pass ends (``event``): what it took, and roughly
    how long all passes of all configurations will, at that pace."""
    assert event.seconds is not None
    at_once = bench.parallelism(event.config.workers, cpus)
    one_at_a_time = event.seconds * at_once
    passes = settings.warmup + settings.repeat
    total = bench.estimate_seconds(settings.configs, passes, one_at_a_time, cpus)
    if event.config.kind == "tvm":
        what = "TVM's way, one kernel at a time,"
    else:
        what = f"{event.config.label} ({at_once} at once)"
    return (
        f"bench: the first pass, {what} took {event.seconds:.1f} s for {event.total} kernels "
        f"({one_at_a_time / max(event.total, 1):.2f} s each here): "
        f"{passes * len(settings.configs)} passes in all, roughly {_minutes(total)}"
    )


def closer_forecast(passes: dict[int, list[float]], settings: bench.BenchSettings) -> str | None:
    """The line printed once every configuration has run (``None`` when no pass is left):
    ``passes`` maps each one's index to the walls of its passes so far; each pass left is
    taken to last as long as that configuration's latest."""
    each = settings.warmup + settings.repeat
    left = {index: each - len(walls) for index, walls in passes.items()}
    seconds = sum(left[index] * walls[-1] for index, walls in passes.items())
    if not sum(left.values()):
        return None
    return (
        f"bench: every configuration has run a pass: the {sum(left.values())} passes left "
        f"should take about {_minutes(seconds)}"
    )


class _Progress:
    """Progress on stderr: a live counter on a terminal, else a line per pass (and one
    every ``every`` seconds inside a long pass), and the forecasts (with ``settings``)."""

    def __init__(
        self,
        stream: TextIO,
        live: bool,
        every: float = 15.0,
        settings: bench.BenchSettings | None = None,
        cpus: int = 1,
    ) -> None:
        self.stream = stream
        self.live = live
        self.every = every
        self.settings = settings
        self.cpus = cpus
        self._last = 0.0
        self._forecast = settings is not None
        self._passes: dict[int, list[float]] = {}

    def __call__(self, event: bench.Progress) -> None:
        phase = f"{event.phase} {event.number}/{event.passes}" + (" (cold)" if event.cold else "")
        what = f"bench: [{event.index}/{event.configs}] {event.config.label:<24} {phase:<17}"
        now = time.monotonic()
        if event.seconds is not None:
            line = f"{what} {event.seconds:8.2f} s"
            self.stream.write(("\r" + line.ljust(79) if self.live else line) + "\n")
            if self.settings is not None:
                self._forecasts(event, self.settings)
        elif self.live:
            self.stream.write(f"\r{what} {event.done}/{event.total}")
        elif event.done == 0:
            self._last = now
            return
        elif now - self._last >= self.every and event.done < event.total:
            self._last = now
            self.stream.write(f"{what} {event.done}/{event.total} ...\n")
        self.stream.flush()

    def _forecasts(self, event: bench.Progress, settings: bench.BenchSettings) -> None:
        assert event.seconds is not None
        if self._forecast:
            self._forecast = False
            self.stream.write(forecast(event, settings, self.cpus) + "\n")
        first_time = len(self._passes) < event.configs
        self._passes.setdefault(event.index, []).append(event.seconds)
        if first_time and len(self._passes) == event.configs and event.configs > 1:
            closer = closer_forecast(self._passes, settings)
            if closer is not None:
                self.stream.write(closer + "\n")


def _error(message: str) -> int:
    print(f"asynccomp: error: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    try:
        workers = args.workers or _default_workers()
        configs = bench.expand_configs(args.configs, workers, args.fast_path)
        settings = bench.BenchSettings(
            configs,
            arch=args.arch,
            style=args.style,
            repeat=args.repeat,
            warmup=args.warmup,
            nvrtc_cache=args.nvrtc_cache == "on",
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
    cpus = default_workers()
    print(
        f"bench: {len(kernels)} kernels, {len(configs)} configurations, "
        f"{settings.warmup} warm-up + {settings.repeat} timed passes each; "
        "a forecast of the time follows the first pass",
        file=sys.stderr,
    )
    crowded = sorted({c.workers for c in configs if c.kind != "tvm" and c.workers > cpus})
    if crowded:
        print(
            f"bench: warning: --workers {','.join(map(str, crowded))} outnumber the {cpus} "
            f"CPUs here: more than {cpus} only take turns (ideal and eff count {cpus})",
            file=sys.stderr,
        )
    progress = _Progress(sys.stderr, live=sys.stderr.isatty(), settings=settings, cpus=cpus)
    # Asked before any engine starts, so the CUDA driver this loads weighs on the memory
    # of every configuration alike.
    machine = bench.machine_info()

    def write_json(measured: bench.BenchRun) -> None:
        if args.json is not None:
            stats = bench.summarize(measured.runs, len(measured.kernels), cpus)
            document = bench.report_json(measured, stats, args.command_line, machine)
            text = json.dumps(document, indent=2) + "\n"
            write_new(args.json, text.encode(), umask_of(None))

    # The JSON is also written after every timed round: a long run that is stopped
    # keeps what it measured.
    result = anyio.run(bench.run_bench, kernels, settings, progress, write_json)
    stats = bench.summarize(result.runs, len(result.kernels), cpus)
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
