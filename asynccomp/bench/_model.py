"""What a benchmark runs (configurations, settings) and what it measured (passes, stats).

Everything here is plain data and arithmetic, so the figures a report prints can be
checked with made-up measurements.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast, get_args

from .._scheduler._limits import default_workers
from ..errors import BenchError
from ..job import Backend, parse_arch

__all__ = (
    "CONFIG_KINDS",
    "STYLES",
    "BenchConfig",
    "BenchError",
    "BenchSettings",
    "ConfigRun",
    "ConfigStats",
    "Kernel",
    "PassResult",
    "estimate_seconds",
    "expand_configs",
    "parallelism",
    "percentile",
    "summarize",
)


ConfigKind = Literal["tvm", "threads", "processes", "nvcc"]
CONFIG_KINDS: tuple[str, ...] = get_args(ConfigKind)
Style = Literal["tvm", "plain"]
STYLES: tuple[str, ...] = get_args(Style)


@dataclass(frozen=True)
class Kernel:
    """One source of the corpus."""

    name: str
    source: str
    path: Path | None = None


@dataclass(frozen=True)
class BenchConfig:
    """One way of compiling the corpus.

    ``kind`` is ``"tvm"`` (the baseline: one kernel at a time in this process, NVRTC,
    original source, as TVM's ``tvm_callback_cuda_compile`` does), ``"threads"`` or
    ``"processes"`` (the engine's NVRTC in that mode), or ``"nvcc"`` (the engine's nvcc
    backend, fatbin). ``fast_path`` is the engine's ``tvm_fast_path`` (``None`` for nvcc,
    where it does not apply).
    """

    kind: ConfigKind
    workers: int = 1
    fast_path: bool | None = False

    @property
    def backend(self) -> Backend:
        return "nvcc" if self.kind == "nvcc" else "nvrtc"

    @property
    def series(self) -> str:
        """The configuration without its worker count: one line of the plot."""
        if self.kind in ("threads", "processes"):
            return f"{self.kind}, fast path {'on' if self.fast_path else 'off'}"
        return self.kind

    @property
    def label(self) -> str:
        if self.kind == "tvm":
            return "tvm (baseline)"
        fast = "" if self.fast_path is None else f" fast {'on' if self.fast_path else 'off'}"
        return f"{self.kind} x{self.workers}{fast}"


def expand_configs(
    kinds: Iterable[str], workers: Sequence[int], fast_paths: Sequence[bool]
) -> tuple[BenchConfig, ...]:
    """Every configuration that ``kinds`` x ``workers`` x ``fast_paths`` names, in that
    order; ``"tvm"`` (one worker, no fast path) and nvcc (no fast path) once per count."""
    configs: list[BenchConfig] = []
    for name in kinds:
        if name not in CONFIG_KINDS:
            raise BenchError(f"unknown configuration {name!r} (expected {', '.join(CONFIG_KINDS)})")
        kind = cast(ConfigKind, name)
        if kind == "tvm":
            configs.append(BenchConfig("tvm", 1, False))
        elif kind == "nvcc":
            configs += [BenchConfig("nvcc", w, None) for w in workers]
        else:
            configs += [BenchConfig(kind, w, f) for w in workers for f in fast_paths]
    unique = tuple(dict.fromkeys(configs))
    if not unique:
        raise BenchError("no configuration to run")
    return unique


@dataclass(frozen=True)
class BenchSettings:
    """How to run: the configurations, the target, and how many passes.

    Each configuration first runs ``warmup`` untimed passes over the corpus, then
    ``repeat`` timed ones; the order of configurations is reversed on every other timed
    round. ``style="tvm"`` compiles each kernel exactly as TVM 0.27 would (its source
    rewrite and options, :func:`asynccomp.tvm.make_job`); ``"plain"`` compiles the files
    as they are with the engine's own options. ``nvrtc_cache=False`` (the default) turns
    NVRTC's own cache off for the run (see :mod:`asynccomp.bench._nvrtc_cache`: on a GPU
    machine it answers the passes' sources, which differ only by a comment).
    """

    configs: tuple[BenchConfig, ...]
    arch: str = "sm_90a"
    style: Style = "tvm"
    repeat: int = 3
    warmup: int = 1
    nvrtc_cache: bool = False

    def __post_init__(self) -> None:
        parse_arch(self.arch)
        if self.style not in STYLES:
            raise BenchError(f"style must be one of {', '.join(STYLES)}, not {self.style!r}")
        if self.repeat < 1:
            raise BenchError("repeat must be at least 1")
        if self.warmup < 0:
            raise BenchError("warmup must be 0 or more")
        if not self.configs:
            raise BenchError("no configuration to run")


@dataclass(frozen=True)
class PassResult:
    """One pass over the corpus: its wall time and, per kernel (in corpus order), the
    compile time and the time spent waiting for a worker."""

    wall: float
    elapsed: tuple[float, ...]
    queued: tuple[float, ...]
    failures: tuple[tuple[str, str], ...] = ()
    peak_rss: int | None = None


@dataclass(frozen=True)
class ConfigRun:
    """All that was measured for one configuration.

    ``startup`` is starting its engine and warming its workers up; ``passes`` are every
    pass in the order run, the first ``untimed`` of them the warm-up passes (the first
    pass of all is the cold one).
    """

    config: BenchConfig
    startup: float
    passes: tuple[PassResult, ...]
    untimed: int

    @property
    def timed(self) -> tuple[PassResult, ...]:
        return self.passes[self.untimed :]

    @property
    def cold(self) -> float:
        """Seconds a fresh engine took to start and finish its first pass."""
        return self.startup + self.passes[0].wall

    @property
    def peak_rss(self) -> int | None:
        peaks = [p.peak_rss for p in self.passes if p.peak_rss is not None]
        return max(peaks) if peaks else None

    def kernel_times(self) -> list[float]:
        """Per kernel, the median of its compile times over the timed passes."""
        return [
            statistics.median(times) for times in zip(*(p.elapsed for p in self.timed), strict=True)
        ]


@dataclass(frozen=True)
class ConfigStats:
    """The figures a report prints for one configuration (times in seconds).

    ``ideal`` is what perfect scaling would give: the per-kernel compile times of the
    same configuration at one worker, summed and divided by ``parallelism`` (the worker
    count, but no more than the CPUs: workers beyond them only take turns), or the
    longest of them if that is larger. When one worker was not measured, this
    configuration's own compile times stand in (``ideal_basis == "own"``); they include
    any slowdown from contention, so that ideal is optimistic about efficiency.
    """

    config: BenchConfig
    wall: float
    walls: tuple[float, ...]
    parallelism: int
    kernels_per_s: float
    speedup: float | None
    ideal: float
    ideal_basis: Literal["1 worker", "own"]
    efficiency: float
    compile_sum: float
    longest_job: float
    latency_p50: float
    latency_p99: float
    peak_rss: int | None
    cold: float
    startup: float
    failed: int
    kernel_times: tuple[float, ...]


def parallelism(workers: int, cpus: int | None = None) -> int:
    """How many compiles can really run at once: ``workers``, but no more than ``cpus``
    (default: the CPUs this process may run on). 16 workers on 2 CPUs take turns on 2."""
    return max(1, min(workers, default_workers() if cpus is None else cpus))


def estimate_seconds(
    configs: Iterable[BenchConfig], passes: int, one_at_a_time: float, cpus: int | None = None
) -> float:
    """A rough forecast of a benchmark's length: ``passes`` passes of every configuration,
    when one pass compiling the corpus one kernel at a time takes ``one_at_a_time``
    seconds and a configuration of ``w`` workers divides that by :func:`parallelism`.
    It leaves out engine starts and the fast path's savings, so it errs long."""
    return sum(passes * one_at_a_time / parallelism(c.workers, cpus) for c in configs)


def percentile(values: Iterable[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile (``p`` in 0..100) of ``values``."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def _series_key(config: BenchConfig) -> tuple[str, bool | None]:
    return config.kind, config.fast_path


def summarize(
    runs: Sequence[ConfigRun], kernels: int, cpus: int | None = None
) -> list[ConfigStats]:
    """The figures for every run; speedups are against the ``"tvm"`` run, if there is one.
    ``cpus`` (default: the CPUs this process may run on) caps the parallelism the ideal
    assumes, so that 16 workers on 2 CPUs are held to what 2 can do."""
    baseline = next((r for r in runs if r.config.kind == "tvm"), None)
    base_wall = statistics.median(p.wall for p in baseline.timed) if baseline else None
    one_worker = {_series_key(r.config): r.kernel_times() for r in runs if r.config.workers == 1}
    stats: list[ConfigStats] = []
    for run in runs:
        config = run.config
        walls = tuple(p.wall for p in run.timed)
        wall = statistics.median(walls)
        own = run.kernel_times()
        reference = one_worker.get(_series_key(config))
        basis: Literal["1 worker", "own"] = "1 worker" if reference is not None else "own"
        times = reference if reference is not None else own
        longest = max(times, default=0.0)
        at_once = parallelism(config.workers, cpus)
        ideal = max(sum(times) / at_once, longest)
        latencies = [q + e for p in run.timed for q, e in zip(p.queued, p.elapsed, strict=True)]
        stats.append(
            ConfigStats(
                config=config,
                wall=wall,
                walls=walls,
                parallelism=at_once,
                kernels_per_s=kernels / wall if wall > 0 else math.inf,
                speedup=base_wall / wall if base_wall is not None and wall > 0 else None,
                ideal=ideal,
                ideal_basis=basis,
                efficiency=ideal / wall if wall > 0 else math.nan,
                compile_sum=sum(own),
                longest_job=max(own, default=0.0),
                latency_p50=percentile(latencies, 50),
                latency_p99=percentile(latencies, 99),
                peak_rss=run.peak_rss,
                cold=run.cold,
                startup=run.startup,
                failed=max((len(p.failures) for p in run.passes), default=0),
                kernel_times=tuple(own),
            )
        )
    return stats
