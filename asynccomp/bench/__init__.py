"""The benchmark harness behind ``asynccomp bench``: how fast does a corpus compile?

A corpus of ``.cu`` files (default: the built-in examples) is compiled by several
configurations: the one-at-a-time TVM-way baseline (``"tvm"``), the engine's NVRTC in
threads or worker processes, and its nvcc backend, each at several worker counts and with
the TVM preamble fast path on or off. Every configuration warms up first, the timed
passes alternate their order, and the report gives medians: wall time, kernels per
second, speedup over the baseline, ideal time and parallel efficiency, p50/p99 per-job
latency, peak memory (with psutil), and the cold start::

    import anyio
    from asynccomp import bench

    kernels = bench.load_corpus(limit=6)  # the first 6 built-in examples
    settings = bench.BenchSettings(bench.expand_configs(["tvm", "processes"], [1, 2], [True]))
    run = anyio.run(bench.run_bench, kernels, settings)
    stats = bench.summarize(run.runs, len(run.kernels))
    print(bench.format_table(run, stats))

See :mod:`asynccomp.bench._run` for the order of passes and :class:`ConfigStats` for
what each figure means.
"""

from __future__ import annotations

from ._memory import MemorySampler, memory_sampling_available
from ._model import (
    CONFIG_KINDS,
    STYLES,
    BenchConfig,
    BenchError,
    BenchSettings,
    ConfigRun,
    ConfigStats,
    Kernel,
    PassResult,
    estimate_seconds,
    expand_configs,
    parallelism,
    percentile,
    summarize,
)
from ._report import (
    format_table,
    machine_info,
    plot_available,
    report_json,
    text_table,
    write_plot,
)
from ._run import BenchRun, Progress, build_jobs, load_corpus, run_bench

__all__ = (
    "BenchConfig",
    "BenchError",
    "BenchRun",
    "BenchSettings",
    "CONFIG_KINDS",
    "ConfigRun",
    "ConfigStats",
    "Kernel",
    "MemorySampler",
    "PassResult",
    "Progress",
    "STYLES",
    "build_jobs",
    "estimate_seconds",
    "expand_configs",
    "format_table",
    "load_corpus",
    "machine_info",
    "memory_sampling_available",
    "parallelism",
    "percentile",
    "plot_available",
    "report_json",
    "run_bench",
    "summarize",
    "text_table",
    "write_plot",
)
