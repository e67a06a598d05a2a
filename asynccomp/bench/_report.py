"""A benchmark's results as a text table, a JSON document and a PNG plot."""

from __future__ import annotations

import math
import os
import platform
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from ..engine import default_workers
from ..gpu import local_gpu_arch
from ._model import BenchError, ConfigStats
from ._run import BenchRun

__all__ = (
    "format_table",
    "machine_info",
    "plot_available",
    "report_json",
    "text_table",
    "write_plot",
)

_MIB = 2**20

# What the columns mean, printed under the table.
LEGEND = """\
speedup: the baseline's wall time / this wall time (same run); ideal: the compile times of
the same configuration at 1 worker, summed / min(workers, CPUs), or its longest job if
larger (*: this configuration's own times, 1 worker not run); eff: ideal / wall, so more
workers than CPUs are held to what the CPUs can do; p50, p99: per-job latency (waiting +
compiling); peak: RSS of this process and its workers; cold: engine start and first pass."""


def _seconds(value: float) -> str:
    return f"{value:.3f}" if value < 10 else f"{value:.2f}" if value < 100 else f"{value:.1f}"


def text_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], align: str | None = None
) -> str:
    """Columns padded to their widest cell, under a rule. ``align`` has one letter per
    column, ``l`` or ``r``; by default the first column is left-aligned, the others right."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows, strict=True)]
    sides = align or "l" + "r" * (len(widths) - 1)

    def line(cells: Sequence[str]) -> str:
        padded = (
            str(c).ljust(w) if side == "l" else str(c).rjust(w)
            for c, w, side in zip(cells, widths, sides, strict=True)
        )
        return "  ".join(padded).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in rows)])


def format_table(run: BenchRun, stats: Sequence[ConfigStats]) -> str:
    """The report as text: what ran, one row per configuration, and a legend."""
    settings = run.settings
    versions = ", ".join(f"{k} {v}" for k, v in run.toolkit_versions.items() if v)
    head = (
        f"{len(run.kernels)} kernels, arch {settings.arch}, style {settings.style}; "
        f"{settings.warmup} warm-up + {run.rounds} timed pass(es) per configuration "
        f"(medians); {default_workers()} CPUs; {versions or 'no compiler found'}; "
        f"NVRTC's own cache {'on' if settings.nvrtc_cache else 'off'}"
    )
    headers = (
        "config",
        "workers",
        "fast",
        "wall s",
        "kern/s",
        "speedup",
        "ideal s",
        "eff",
        "p50 s",
        "p99 s",
        "peak MiB",
        "cold s",
        "failed",
    )
    rows = []
    for s in stats:
        c = s.config
        fast = "-" if c.fast_path is None else "on" if c.fast_path else "off"
        rows.append(
            (
                c.kind,
                str(c.workers),
                fast,
                _seconds(s.wall),
                f"{s.kernels_per_s:.1f}",
                "-" if s.speedup is None else f"{s.speedup:.2f}x",
                _seconds(s.ideal) + ("*" if s.ideal_basis == "own" else ""),
                f"{s.efficiency:.0%}" if math.isfinite(s.efficiency) else "-",
                _seconds(s.latency_p50),
                _seconds(s.latency_p99),
                "-" if s.peak_rss is None else f"{s.peak_rss / _MIB:.0f}",
                _seconds(s.cold),
                str(s.failed),
            )
        )
    return f"{head}\n\n{text_table(headers, rows)}\n\n{LEGEND}"


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def machine_info() -> dict[str, Any]:
    """CPU, memory, GPU and package versions of this machine, for reports. Asking for the
    GPU initialises the CUDA driver in this process (more resident memory)."""
    try:
        memory: int | None = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        memory = None
    from .._version import __version__

    return {
        "cpus": os.cpu_count(),
        "usable_cpus": default_workers(),
        "cpu_model": _cpu_model(),
        "memory_bytes": memory,
        "gpu_arch": local_gpu_arch(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "packages": {
            "asynccomp": __version__,
            **{
                name: _package_version(name)
                for name in ("cuda-bindings", "nvidia-cuda-nvrtc", "anyio", "psutil")
            },
        },
    }


def report_json(
    run: BenchRun,
    stats: Sequence[ConfigStats],
    command: Sequence[str] = (),
    machine: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything measured, as JSON-ready data: settings, machine (``machine``, else
    :func:`machine_info` now), toolkit, and per configuration its figures, every pass's
    wall time and each kernel's median compile time."""
    settings = run.settings
    names = [k.name for k in run.kernels]
    configs = []
    for s, config_run in zip(stats, run.runs, strict=True):
        c = s.config
        failures = {name: error for p in config_run.passes for name, error in p.failures}
        configs.append(
            {
                "config": c.kind,
                "label": c.label,
                "workers": c.workers,
                "fast_path": c.fast_path,
                "wall_s": s.wall,
                "walls_s": list(s.walls),
                "warmup_walls_s": [p.wall for p in config_run.passes[: config_run.untimed]],
                "kernels_per_s": s.kernels_per_s,
                "speedup": s.speedup,
                "ideal_s": s.ideal,
                "ideal_basis": s.ideal_basis,
                "parallelism": s.parallelism,
                "efficiency": s.efficiency,
                "compile_sum_s": s.compile_sum,
                "longest_job_s": s.longest_job,
                "latency_p50_s": s.latency_p50,
                "latency_p99_s": s.latency_p99,
                "peak_rss_bytes": s.peak_rss,
                "cold_s": s.cold,
                "startup_s": s.startup,
                "failed": s.failed,
                "failures": failures,
                "kernel_times_s": dict(zip(names, s.kernel_times, strict=True)),
            }
        )
    return {
        "command": list(command),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "settings": {
            "arch": settings.arch,
            "style": settings.style,
            "repeat": settings.repeat,
            "rounds_done": run.rounds,
            "warmup": settings.warmup,
            "nvrtc_cache": settings.nvrtc_cache,
            "kernels": len(names),
            "corpus": sorted({str(k.path.parent) for k in run.kernels if k.path}),
        },
        "machine": machine if machine is not None else machine_info(),
        "toolkit": run.toolkit_versions,
        "kernels": names,
        "results": configs,
    }


def plot_available() -> bool:
    """``True`` when matplotlib (the ``plot`` extra) can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def write_plot(run: BenchRun, stats: Sequence[ConfigStats], path: Path) -> None:
    """A PNG of speedup over the baseline against workers, one line per configuration
    (dashed: its ideal). Without a baseline, kernels per second instead."""
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise BenchError("a plot needs matplotlib: pip install matplotlib") from exc
    baseline = next((s for s in stats if s.config.kind == "tvm"), None)
    fig = Figure(figsize=(8, 5), layout="constrained")
    ax = fig.subplots()
    series: dict[str, list[ConfigStats]] = {}
    for s in stats:
        if s.config.kind != "tvm":
            series.setdefault(s.config.series, []).append(s)
    for name, points in series.items():
        points.sort(key=lambda s: s.config.workers)
        workers = [s.config.workers for s in points]
        if baseline is not None:
            speedups = [baseline.wall / s.wall for s in points]
            (line,) = ax.plot(workers, speedups, marker="o", label=name)
            ideal = [baseline.wall / s.ideal if s.ideal > 0 else math.nan for s in points]
            ax.plot(workers, ideal, linestyle="--", color=line.get_color(), alpha=0.5)
        else:
            ax.plot(workers, [s.kernels_per_s for s in points], marker="o", label=name)
    if baseline is not None:
        ax.axhline(1.0, color="grey", linewidth=1, label="tvm (baseline)")
        ax.set_ylabel("speedup over one-at-a-time TVM (dashed: ideal)")
    else:
        ax.set_ylabel("kernels per second")
    ax.set_xscale("log", base=2)
    all_workers = sorted({s.config.workers for s in stats})
    ax.set_xticks(all_workers, [str(w) for w in all_workers])
    ax.set_xlabel("workers")
    settings = run.settings
    ax.set_title(f"{len(run.kernels)} kernels, {settings.arch}, style {settings.style}")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.savefig(path, dpi=120)
