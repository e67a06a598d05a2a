"""The benchmark harness: its arithmetic on made-up measurements, and ``asynccomp bench``
through a subprocess with the real compilers on a tiny corpus."""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anyio
import pytest

from asynccomp import CompileJob, bench
from asynccomp.bench import BenchConfig, BenchError, BenchSettings, ConfigRun, PassResult

from .kernels import ARCH, broken_kernel, needs_nvcc, scale_kernel
from .test_cli import asynccomp

# -- configurations and settings -------------------------------------------------------


def test_expand_configs_in_the_order_given() -> None:
    configs = bench.expand_configs(["processes", "tvm", "nvcc"], [1, 4], [True, False])
    assert [(c.kind, c.workers, c.fast_path) for c in configs] == [
        ("processes", 1, True),
        ("processes", 1, False),
        ("processes", 4, True),
        ("processes", 4, False),
        ("tvm", 1, False),  # the baseline runs once, one at a time, no fast path
        ("nvcc", 1, None),  # the fast path is NVRTC's only
        ("nvcc", 4, None),
    ]
    assert configs[0].label == "processes x1 fast on" and configs[4].label == "tvm (baseline)"
    assert configs[0].series == "processes, fast path on" and configs[5].series == "nvcc"
    # Naming one twice runs it once.
    assert len(bench.expand_configs(["tvm", "tvm", "threads"], [2, 2], [True])) == 2


@pytest.mark.parametrize(
    ("kinds", "workers", "match"),
    [(["gcc"], [1], "unknown configuration 'gcc'"), ([], [1], "no configuration")],
)
def test_expand_configs_rejects(kinds: list[str], workers: list[int], match: str) -> None:
    with pytest.raises(BenchError, match=match):
        bench.expand_configs(kinds, workers, [True])


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"arch": "sm90"}, "invalid arch"),
        ({"repeat": 0}, "repeat"),
        ({"warmup": -1}, "warmup"),
        ({"style": "fancy"}, "style"),
    ],
)
def test_settings_are_checked(changes: dict[str, object], match: str) -> None:
    configs = (BenchConfig("tvm"),)
    with pytest.raises(ValueError, match=match):
        BenchSettings(configs, **changes)  # type: ignore[arg-type]


# -- arithmetic ------------------------------------------------------------------------


def _pass(wall: float, elapsed: list[float], queued: list[float] | None = None) -> PassResult:
    return PassResult(wall, tuple(elapsed), tuple(queued or [0.0] * len(elapsed)), peak_rss=100)


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert bench.percentile(values, 50) == 50.0
    assert bench.percentile(values, 99) == 99.0
    assert bench.percentile([3.0, 1.0, 2.0], 99) == 3.0
    assert bench.percentile([5.0], 50) == 5.0
    assert math.isnan(bench.percentile([], 50))


def test_summarize_speedup_ideal_efficiency_latency() -> None:
    baseline = ConfigRun(
        BenchConfig("tvm"),
        startup=0.5,
        passes=(_pass(20.0, [5, 5, 5, 5]), _pass(10.0, [2, 3, 2, 3]), _pass(12.0, [3, 3, 3, 3])),
        untimed=1,
    )
    # One worker: per-kernel medians over the two timed passes are 1, 1, 1, 3 (sum 6).
    one = ConfigRun(
        BenchConfig("processes", 1, True),
        startup=1.0,
        passes=(_pass(6.0, [1, 1, 1, 3]), _pass(6.2, [1, 1, 1, 3])),
        untimed=0,
    )
    four = ConfigRun(
        BenchConfig("processes", 4, True),
        startup=2.0,
        passes=(
            _pass(9.0, [2, 2, 2, 4]),
            _pass(4.0, [1.5, 1.5, 1.5, 3.5], queued=[0, 0, 0, 0.5]),
            _pass(3.0, [1.5, 1.5, 1.5, 3.5], queued=[0, 0, 0, 0.5]),
        ),
        untimed=1,
    )
    # Two workers, fast path off: no one-worker run of that kind, so its own times count.
    two_off = ConfigRun(
        BenchConfig("processes", 2, False),
        startup=1.0,
        passes=(PassResult(5.0, (2.0, 2.0, 2.0, 2.0), (0.0,) * 4, failures=(("k3", "boom"),)),),
        untimed=0,
    )
    base, s1, s4, s2 = bench.summarize([baseline, one, four, two_off], kernels=4, cpus=16)

    assert base.wall == 11.0 and base.speedup == 1.0 and base.walls == (10.0, 12.0)
    assert base.cold == 20.5 and base.startup == 0.5
    assert s1.wall == pytest.approx(6.1) and s1.speedup == pytest.approx(11 / 6.1)
    assert s1.ideal == 6.0 and s1.ideal_basis == "1 worker"
    assert s1.kernels_per_s == pytest.approx(4 / 6.1)
    # Four workers: 6 s of one-worker work / 4 = 1.5 s, but the longest job takes 3 s.
    assert s4.wall == 3.5 and s4.ideal == 3.0 and s4.efficiency == pytest.approx(3.0 / 3.5)
    assert s4.compile_sum == 8.0 and s4.longest_job == 3.5 and s4.kernel_times[3] == 3.5
    assert s4.latency_p50 == 1.5 and s4.latency_p99 == 4.0  # queued + elapsed
    assert s4.cold == 11.0 and s4.peak_rss == 100
    assert s2.ideal_basis == "own" and s2.ideal == 4.0 and s2.failed == 1


def test_more_workers_than_cpus_are_held_to_the_cpus() -> None:
    """16 workers on 2 CPUs can do what 2 can: the ideal (and so eff) counts 2, not 16."""
    one = ConfigRun(BenchConfig("processes", 1, True), 0.0, (_pass(8.0, [2, 2, 2, 2]),), 0)
    many = ConfigRun(BenchConfig("processes", 16, True), 0.0, (_pass(4.0, [2, 2, 2, 2]),), 0)
    _, on_two = bench.summarize([one, many], kernels=4, cpus=2)
    assert on_two.parallelism == 2 and on_two.ideal == 4.0 and on_two.efficiency == 1.0
    _, on_sixteen = bench.summarize([one, many], kernels=4, cpus=16)
    # 8 s of work / 16 = 0.5 s, but the longest job takes 2 s.
    assert on_sixteen.parallelism == 16 and on_sixteen.ideal == 2.0
    assert on_sixteen.efficiency == 0.5
    assert bench.parallelism(16, 2) == 2 and bench.parallelism(1, 2) == 1


def test_the_forecast_of_a_run() -> None:
    from asynccomp.cli._bench import closer_forecast, forecast

    configs = bench.expand_configs(["tvm", "processes"], [1, 2, 4], [True])
    settings = BenchSettings(configs, repeat=3, warmup=1)
    # 4 passes of: tvm 10 s, processes x1 10 s, x2 5 s, x4 on 2 CPUs 5 s: 120 s.
    assert bench.estimate_seconds(configs, 4, 10.0, cpus=2) == 120.0
    first = bench.Progress(configs[0], 1, 4, "warm-up", 1, 1, True, 20, 20, seconds=10.0)
    assert forecast(first, settings, cpus=2) == (
        "bench: the first pass, TVM's way, one kernel at a time, took 10.0 s for 20 kernels "
        "(0.50 s each here): 16 passes in all, roughly 2 min"
    )
    # Had a configuration of 4 workers on 2 CPUs come first: 2 at once.
    wide = bench.Progress(configs[3], 1, 4, "warm-up", 1, 1, True, 20, 20, seconds=5.0)
    assert "processes x4 fast on (2 at once) took 5.0 s" in forecast(wide, settings, cpus=2)
    # Once each has run its warm-up pass: 3 passes left each, at its own pace.
    walls = {1: [10.0], 2: [2.0], 3: [1.5], 4: [100.0]}
    assert closer_forecast(walls, settings) == (
        "bench: every configuration has run a pass: the 12 passes left should take about 6 min"
    )
    assert closer_forecast({1: [1.0, 1.0, 1.0, 1.0]}, settings) is None


def test_without_a_baseline_there_is_no_speedup() -> None:
    run = ConfigRun(BenchConfig("nvcc", 2, None), 0.0, (_pass(1.0, [1.0]),), untimed=0)
    (stats,) = bench.summarize([run], kernels=1)
    assert stats.speedup is None and stats.ideal_basis == "own"


def test_text_table_pads_columns() -> None:
    table = bench.text_table(("name", "n"), [("a", "1"), ("bbb", "22")])
    assert table.splitlines() == ["name   n", "----  --", "a      1", "bbb   22"]
    assert bench.text_table(("x", "y"), [("1", "2")], "rl").splitlines()[2] == "1  2"


# -- corpus and jobs -------------------------------------------------------------------


def test_load_corpus(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "b.cu").write_text(scale_kernel(1.0))
    (tmp_path / "sub" / "a.cu").write_text(scale_kernel(2.0))
    (tmp_path / "notes.txt").write_text("not a kernel")
    kernels = bench.load_corpus(tmp_path)
    assert [k.name for k in kernels] == ["b", "sub/a"]
    assert [k.name for k in bench.load_corpus(tmp_path, limit=1)] == ["b"]
    assert len(bench.load_corpus(limit=3)) == 3  # the built-in examples
    with pytest.raises(BenchError, match="no such folder"):
        bench.load_corpus(tmp_path / "missing")
    with pytest.raises(BenchError, match="limit"):
        bench.load_corpus(tmp_path, limit=0)
    (tmp_path / "empty").mkdir()
    with pytest.raises(BenchError, match=r"no \.cu files"):
        bench.load_corpus(tmp_path / "empty")


def test_build_jobs_styles() -> None:
    kernels = bench.load_corpus(limit=2)
    settings = BenchSettings((BenchConfig("tvm"),), arch=ARCH)
    tvm_jobs = bench.build_jobs(kernels, "nvrtc", settings)
    # TVM's way: its program name, its complete option list, its rewritten source.
    assert all(j.exact_options and j.name == "tvm_kernels" for j in tvm_jobs)
    assert all("--gpu-architecture=sm_90a" in j.options for j in tvm_jobs)
    assert all(j.source != k.source for j, k in zip(tvm_jobs, kernels, strict=True))
    nvcc_jobs = bench.build_jobs(kernels, "nvcc", settings)
    assert all(j.backend == "nvcc" and j.output == "fatbin" for j in nvcc_jobs)
    plain = bench.build_jobs(kernels, "nvrtc", BenchSettings(settings.configs, style="plain"))
    assert [(j.name, j.source, j.exact_options) for j in plain] == [
        (k.name, k.source, False) for k in kernels
    ]


def test_run_bench_passes_progress_and_rounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kernels = bench.load_corpus(_tiny_corpus(tmp_path / "corpus", count=2))
    configs = bench.expand_configs(["tvm", "threads"], [1], [True])
    settings = BenchSettings(configs, arch=ARCH, style="plain", repeat=2, warmup=1)
    events: list[bench.Progress] = []
    rounds: list[bench.BenchRun] = []
    sources = _record_sources(monkeypatch)
    run = anyio.run(bench.run_bench, kernels, settings, events.append, rounds.append)
    # Every pass of every configuration compiled sources nobody compiled before (NVRTC's
    # own cache would answer a repeat), each the corpus's plus a comment.
    assert len(sources) == len(set(sources)) == 2 * 2 * 3
    assert all(s.startswith(tuple(k.source for k in kernels)) for s in sources)

    finished = [(e.config.kind, e.phase, e.number, e.cold) for e in events if e.seconds is not None]
    assert finished == [
        ("tvm", "warm-up", 1, True),
        ("threads", "warm-up", 1, True),
        ("tvm", "timed", 1, False),
        ("threads", "timed", 1, False),
        ("threads", "timed", 2, False),  # every other round in reverse order
        ("tvm", "timed", 2, False),
    ]
    assert [e.done for e in events if e.config.kind == "tvm"][:3] == [0, 1, 2]
    # After the first timed round (of two), what was measured so far.
    (first,) = rounds
    assert first.rounds == 1 and [len(r.timed) for r in first.runs] == [1, 1]
    assert run.rounds == 2 and [len(r.passes) for r in run.runs] == [3, 3]
    assert all(not p.failures and len(p.elapsed) == 2 for r in run.runs for p in r.passes)


@pytest.mark.parametrize("cache", [False, True], ids=["cache off", "cache on"])
def test_run_bench_turns_nvrtcs_own_cache_off_for_every_process_it_starts(
    cache: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # NVRTC's cache in ~/.nv ignores the comment each pass adds (measured on an H100), so
    # the run sets CUDA_CACHE_DISABLE=1 where every NVRTC of the run reads it: this
    # process's environment, and so the worker processes the engines start.
    import psutil

    monkeypatch.setenv("CUDA_CACHE_DISABLE", "0")  # the user's own, put back afterwards
    kernels = bench.load_corpus(_tiny_corpus(tmp_path / "corpus", count=1))
    configs = bench.expand_configs(["processes"], [1], [True])
    settings = BenchSettings(
        configs, arch=ARCH, style="plain", repeat=1, warmup=0, nvrtc_cache=cache
    )
    seen: dict[str, set[str | None]] = {"here": set(), "workers": set()}

    def progress(event: bench.Progress) -> None:
        seen["here"].add(os.environ.get("CUDA_CACHE_DISABLE"))
        for process in psutil.Process().children(recursive=True):
            with contextlib.suppress(psutil.Error):
                seen["workers"].add(process.environ().get("CUDA_CACHE_DISABLE"))

    run = anyio.run(bench.run_bench, kernels, settings, progress)
    assert not run.runs[0].passes[0].failures
    expected = "0" if cache else "1"
    assert seen == {"here": {expected}, "workers": {expected}}
    assert os.environ["CUDA_CACHE_DISABLE"] == "0"


def _record_sources(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The source of every job the engines are given from now on (they still compile)."""
    from asynccomp import Engine

    seen: list[str] = []
    compile_, as_completed = Engine.compile, Engine.as_completed

    async def compile(self: Engine, job: CompileJob, *args: Any, **kwargs: Any) -> Any:
        seen.append(job.source)
        return await compile_(self, job, *args, **kwargs)

    def completed(self: Engine, jobs: Iterable[CompileJob], *args: Any, **kwargs: Any) -> Any:
        jobs = list(jobs)
        seen.extend(job.source for job in jobs)
        return as_completed(self, jobs, *args, **kwargs)

    monkeypatch.setattr(Engine, "compile", compile)
    monkeypatch.setattr(Engine, "as_completed", completed)
    return seen


def test_memory_sampler_sees_this_process() -> None:
    with bench.MemorySampler() as sampler:
        pass
    assert sampler.peak is not None and sampler.peak > 10 * 2**20


# -- the command -----------------------------------------------------------------------


def _tiny_corpus(folder: Path, count: int = 3) -> Path:
    folder.mkdir()
    for i in range(count):
        (folder / f"k{i}.cu").write_text(scale_kernel(float(i + 1), name=f"scale{i}"))
    return folder


def test_bench_table_json_and_plot(tmp_path: Path) -> None:
    corpus = _tiny_corpus(tmp_path / "corpus")
    report, plot = tmp_path / "bench.json", tmp_path / "bench.png"
    args = ["bench", "--corpus", str(corpus), "--configs", "tvm,threads,processes"]
    args += ["--workers", "1,2", "--repeat", "1", "--warmup", "0", "--json", str(report)]
    if bench.plot_available():
        args += ["--plot", str(plot)]
    proc = asynccomp(*args, cache=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr

    # Progress on stderr, one line per pass; the table on stdout.
    assert "bench: [1/5] tvm (baseline)" in proc.stderr and "timed 1/1 (cold)" in proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()]
    header = next(r for r in rows if r[:1] == ["config"])
    assert header[:6] == ["config", "workers", "fast", "wall", "s", "kern/s"]
    table = [r for r in rows if r[:1] in (["tvm"], ["threads"], ["processes"])]
    assert [r[:3] for r in table] == [
        ["tvm", "1", "off"],
        ["threads", "1", "on"],
        ["threads", "2", "on"],
        ["processes", "1", "on"],
        ["processes", "2", "on"],
    ]
    assert table[0][5] == "1.00x" and all(r[-1] == "0" for r in table)  # speedup, failed

    document = json.loads(report.read_text())
    assert document["command"][:2] == ["asynccomp", "bench"]
    assert document["settings"]["kernels"] == 3 and document["settings"]["style"] == "tvm"
    assert document["settings"]["nvrtc_cache"] is False  # every pass compiles
    assert "NVRTC's own cache off" in proc.stdout
    assert document["machine"]["cpus"] >= 1 and document["toolkit"]["nvrtc"]
    assert document["kernels"] == ["k0", "k1", "k2"]
    results = document["results"]
    assert [(r["config"], r["workers"]) for r in results] == [
        ("tvm", 1),
        ("threads", 1),
        ("threads", 2),
        ("processes", 1),
        ("processes", 2),
    ]
    for r in results:
        assert r["wall_s"] > 0 and r["ideal_s"] > 0 and r["efficiency"] > 0
        assert r["ideal_basis"] == "1 worker" and r["speedup"] > 0
        assert r["latency_p99_s"] >= r["latency_p50_s"] > 0
        assert r["peak_rss_bytes"] > 0 and r["cold_s"] >= r["wall_s"]
        assert sorted(r["kernel_times_s"]) == ["k0", "k1", "k2"] and r["failures"] == {}
    assert results[0]["speedup"] == 1.0
    if bench.plot_available():
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@needs_nvcc
def test_bench_nvcc_plain_style_without_baseline(tmp_path: Path) -> None:
    corpus = _tiny_corpus(tmp_path / "corpus")
    proc = asynccomp(
        "bench",
        "--corpus",
        str(corpus),
        "--limit",
        "2",
        "--configs",
        "nvcc,threads",
        "--workers",
        "2",
        "--fast-path",
        "on,off",
        "--style",
        "plain",
        "--repeat",
        "2",
        "--warmup",
        "1",
        cache=tmp_path / "cache",
    )
    assert proc.returncode == 0, proc.stderr
    table = [
        line.split()
        for line in proc.stdout.splitlines()
        if line.split()[:1] in (["nvcc"], ["threads"])
    ]
    assert [r[:3] for r in table] == [
        ["nvcc", "2", "-"],
        ["threads", "2", "on"],
        ["threads", "2", "off"],
    ]
    # No baseline: no speedup; no one-worker run: the ideal comes from their own times.
    assert all(r[5] == "-" and r[6].endswith("*") for r in table)
    assert proc.stdout.startswith("2 kernels, arch sm_90a, style plain")


def test_bench_on_one_cpu_warns_of_crowded_workers_and_forecasts(tmp_path: Path) -> None:
    """A run whose workers outnumber the CPUs says so up front, holds them to the CPUs'
    ideal, and prints a forecast after its first pass."""
    corpus = _tiny_corpus(tmp_path / "corpus", count=2)
    report = tmp_path / "bench.json"
    argv = [sys.executable, "-m", "asynccomp", "bench", "--corpus", str(corpus)]
    argv += ["--configs", "tvm,threads", "--workers", "1,3", "--repeat", "1", "--warmup", "0"]
    argv += ["--style", "plain", "--json", str(report)]
    one_cpu = min(os.sched_getaffinity(0))
    # taskset, not preexec_fn: no Python between fork and exec in a process with threads.
    taskset = shutil.which("taskset")
    if taskset is None:  # pragma: no cover - util-linux is on every Debian
        pytest.skip("no taskset (util-linux) to run on one CPU with")
    proc = subprocess.run(
        [taskset, "--cpu-list", str(one_cpu), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stderr.splitlines()
    assert (
        "bench: warning: --workers 3 outnumber the 1 CPUs here: more than 1 only take turns "
        "(ideal and eff count 1)"
    ) in lines
    assert lines[0].endswith("a forecast of the time follows the first pass")
    (line,) = [line for line in lines if line.startswith("bench: the first pass")]
    assert "TVM's way, one kernel at a time, took" in line and "3 passes in all, roughly" in line
    results = json.loads(report.read_text())["results"]
    assert [(r["workers"], r["parallelism"]) for r in results] == [(1, 1), (1, 1), (3, 1)]


def test_bench_failure_exits_1_with_the_error(tmp_path: Path) -> None:
    corpus = _tiny_corpus(tmp_path / "corpus", count=1)
    (corpus / "broken.cu").write_text(broken_kernel())
    proc = asynccomp(
        "bench",
        "--corpus",
        str(corpus),
        "--configs",
        "threads",
        "--workers",
        "1",
        "--repeat",
        "1",
        "--warmup",
        "0",
        "--style",
        "plain",
        cache=tmp_path / "cache",
    )
    assert proc.returncode == 1
    assert "threads x1 fast on: broken:" in proc.stderr and "undefined_identifier_42" in proc.stderr
    (row,) = [line.split() for line in proc.stdout.splitlines() if line.startswith("threads")]
    assert row[-1] == "1"


def test_bench_plot_without_matplotlib_is_a_usage_error(tmp_path: Path) -> None:
    # A process in which matplotlib cannot be imported, as where the extra is missing.
    code = (
        "import sys; sys.modules['matplotlib'] = None; from asynccomp.cli import main; "
        f"sys.exit(main(['bench', '--plot', {str(tmp_path / 'p.png')!r}]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 2
    assert proc.stderr == "asynccomp: error: --plot needs matplotlib: pip install matplotlib\n"


# -- the benchmark scripts' corpus (issue 39) --------------------------------------------

REPO = Path(__file__).resolve().parent.parent

#: Every script under benchmarks/ that reads a corpus.
CORPUS_SCRIPTS = (
    "cache.sweep",
    "cache.tiers",
    "compile.cold_batch",
    "compile.first_batch",
    "compile.fork_vs_spawn",
    "compile.nvrtc_cache",
    "compile.nvrtc_scaling",
    "compile.ptx_backends",
    "compile.ray_executor",
    "compile.split_compile",
    "compile.time_predictors",
    "parity.fast_path_sass",
    "parity.tvm_binaries",
    "tuners.ms_callbacks",
)


def test_every_corpus_script_is_listed() -> None:
    readers = {
        ".".join(path.relative_to(REPO / "benchmarks").with_suffix("").parts)
        for path in (REPO / "benchmarks").rglob("*.py")
        if path.name != "_corpus.py"
        and any(s in path.read_text() for s in ('"--corpus"', "add_corpus_argument(parser)"))
    }
    assert readers == set(CORPUS_SCRIPTS)


def test_no_benchmark_points_at_the_developers_folder() -> None:
    """Nothing a user runs or reads defaults to, or names, ``../shared``: a folder of the
    developers' that users do not have."""
    for path in sorted((REPO / "benchmarks").rglob("*")):
        if path.suffix not in (".py", ".sh", ".md") or "results" in path.parts:
            continue
        text = path.read_text()
        assert "../shared" not in text, path
        assert '"shared" / "corpus"' not in text, path


@pytest.mark.parametrize("script", CORPUS_SCRIPTS)
def test_a_missing_corpus_is_one_line_naming_make_corpus(script: str, tmp_path: Path) -> None:
    """Each script's default is the built-in examples; a ``--corpus`` folder that is not
    there ends it with one line saying how to make it."""
    missing = tmp_path / "corpus"
    argv = [sys.executable, "-m", f"benchmarks.{script}", "--corpus", str(missing)]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == (
        f"corpus {missing}: no such folder; make it with "
        f"`python -m benchmarks.corpus.make_corpus --out {missing}` (TVM 0.27 in a venv, "
        "see its --help), or leave out --corpus for the built-in examples\n"
    )
    missing.mkdir()  # a folder without kernels: the same advice
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "no .cu files in it; make it with" in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    help_text = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{script}", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "default: the built-in examples" in " ".join(help_text.split())


def test_the_corpus_folder_the_docs_use_is_git_ignored() -> None:
    """``make_corpus --out corpus`` (the README's) writes into the checkout: git ignores it."""
    proc = subprocess.run(
        ["git", "check-ignore", "-q", "corpus/GMM_0_000_0123456789ab.cu"],
        cwd=REPO,
        timeout=60,
    )
    assert proc.returncode == 0


def test_one_job_passes_through_few_modules_and_builds_few_objects() -> None:
    """``benchmarks/house/calls.py`` (issue 35's budget for one ``engine.compile(job)``:
    at most 56 calls between asynccomp modules and 16 asynccomp objects for a compile;
    a cache hit no more than a compile). Counted, not timed: the same on any machine."""
    from benchmarks.house.calls import _main

    figures = anyio.run(_main)
    hit, compiled = figures["cache hit"], figures["compile (threads, no cache)"]
    assert compiled["calls_between_modules"] <= 56, compiled
    assert compiled["objects_built"] <= 16, compiled
    assert hit["calls_between_modules"] <= compiled["calls_between_modules"], hit
    assert hit["objects_built"] <= compiled["objects_built"], hit
