"""The command line, through a subprocess as a user runs it."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from asynccomp.cli import main as cli_main
from asynccomp.cli._compile import compiler_options, unique_names

from .kernels import ARCH, broken_kernel, needs_nvcc, scale_kernel, slow_kernel
from .processes import nvrtc_workers


def asynccomp(
    *args: str, cache: Path, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -m asynccomp ARGS`` with its own cache folder (and ``env`` on top)."""
    env = {**os.environ, "ASYNCCOMP_CACHE_DIR": str(cache), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "asynccomp", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
        check=False,
    )


def asynccomp_on_terminal(*args: str, cache: Path) -> tuple[int, str, str]:
    """Run with stdout on a pseudo-terminal (as in an interactive shell); returns the
    exit status, what the terminal received, and stderr."""
    env = {**os.environ, "ASYNCCOMP_CACHE_DIR": str(cache)}
    controller, terminal = pty.openpty()
    received = bytearray()
    try:
        with subprocess.Popen(
            [sys.executable, "-m", "asynccomp", *args],
            stdin=subprocess.DEVNULL,
            stdout=terminal,
            stderr=subprocess.PIPE,
            env=env,
        ) as proc:
            os.close(terminal)
            terminal = -1
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                ready, _, _ = select.select([controller], [], [], 0.2)
                if ready:
                    try:
                        chunk = os.read(controller, 65536)
                    except OSError:  # EIO: the child closed the terminal
                        break
                    if not chunk:
                        break
                    received += chunk
                elif proc.poll() is not None:
                    break
            assert proc.stderr is not None
            stderr = proc.stderr.read().decode()
            code = proc.wait(timeout=60)
    finally:
        os.close(controller)
        if terminal >= 0:
            os.close(terminal)
    return code, received.decode(), stderr


def test_compile_folder_writes_binaries_and_json(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for i in range(3):
        (src / f"k{i}.cu").write_text(scale_kernel(float(i + 1)))
    out, report = tmp_path / "out", tmp_path / "report.json"
    proc = asynccomp(
        "compile",
        str(src),
        "--arch",
        ARCH,
        "--out",
        str(out),
        "--json",
        str(report),
        cache=tmp_path / "cache",
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["k0.cubin", "k1.cubin", "k2.cubin"]
    records = json.loads(report.read_text())
    assert sorted(r["name"] for r in records) == ["k0", "k1", "k2"]
    for r in records:
        assert r["status"] == "ok" and r["error"] is None
        assert r["resources"]["scale"]["registers"] > 0
        assert r["elapsed"] > 0 and r["queued"] >= 0
        assert r["binary"] == f"{r['name']}.cubin" and r["path"] == str(src / f"{r['name']}.cu")
    # Not a terminal: one plain line per job, no progress bar, then the summary.
    assert "\r" not in proc.stdout
    job_lines = [line.split() for line in proc.stdout.splitlines() if line.startswith("[")]
    assert [fields[0] for fields in job_lines] == ["[1/3]", "[2/3]", "[3/3]"]
    assert sorted(fields[1] for fields in job_lines) == ["k0", "k1", "k2"]
    assert all(fields[2] == "ok" for fields in job_lines)
    assert "3 jobs: 3 succeeded (3 compiled, 0 from the cache), 0 failed" in proc.stdout
    assert "slowest jobs" in proc.stdout and "most registers:" in proc.stdout


def test_failure_exits_1_with_diagnostics(tmp_path: Path) -> None:
    (tmp_path / "bad.cu").write_text(broken_kernel())
    (tmp_path / "good.cu").write_text(scale_kernel())
    proc = asynccomp("compile", str(tmp_path), "--arch", ARCH, cache=tmp_path / "cache")
    assert proc.returncode == 1
    assert "--- bad: " in proc.stderr and "undefined_identifier_42" in proc.stderr
    assert "1 compiled" in proc.stdout and "1 failed" in proc.stdout
    assert any(
        line.split()[1:3] == ["bad", "CompileError"] for line in proc.stdout.splitlines()[:2]
    )


@pytest.mark.parametrize(
    "args",
    [
        ["compile", "MISSING/missing.cu", "--arch", ARCH],
        ["compile", "--bogus"],
        ["compile", "--examples", "--arch", "sm90"],
        ["compile", "--examples", "--arch", ARCH, "--timeout", "-1"],
        ["compile", "--examples", "--arch", ARCH, "--timeout", "soon"],
        ["compile", "--examples", "--arch", ARCH, "-j", "0"],
        ["compile", "--examples", "--arch", ARCH, "--backend", "nvrtc", "--output", "fatbin"],
        ["compile", "--examples", "--arch", ARCH, "--", "-I"],
        ["compile", "--examples", "--arch", ARCH, "--json", "MISSING/report.json"],
        ["compile"],
        ["frobnicate"],
        ["bench", "--configs", "tvm,gcc"],
        ["bench", "--workers", "1,zero"],
        ["bench", "--fast-path", "maybe"],
        ["bench", "--repeat", "0"],
        ["bench", "--corpus", "MISSING"],
        ["bench", "--arch", "volta"],
        ["bench", "--", "-O3"],
    ],
)
def test_usage_errors_exit_2_in_one_line(args: list[str], tmp_path: Path) -> None:
    args = [a.replace("MISSING", str(tmp_path / "missing")) for a in args]
    proc = asynccomp(*args, cache=tmp_path / "cache")
    assert proc.returncode == 2, (args, proc.stderr)
    assert proc.stderr.startswith("asynccomp: error:"), proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_inputs_that_share_a_file_name_get_distinct_outputs(tmp_path: Path) -> None:
    for folder, factor in (("a", 1.0), ("b", 2.0)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "k.cu").write_text(scale_kernel(factor))
    (tmp_path / "a" / "j.cu").write_text(scale_kernel(3.0))
    out, report = tmp_path / "out", tmp_path / "report.json"
    proc = asynccomp(
        "compile",
        str(tmp_path / "a"),
        str(tmp_path / "b"),
        str(tmp_path / "a" / "k.cu"),  # named twice: compiled once
        "--arch",
        ARCH,
        "--out",
        str(out),
        "--json",
        str(report),
        cache=tmp_path / "cache",
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["a_k.cubin", "b_k.cubin", "j.cubin"]
    assert "a/k.cu -> a_k" in proc.stderr and "b/k.cu -> b_k" in proc.stderr
    paths = {r["name"]: r["path"] for r in json.loads(report.read_text())}
    assert paths == {
        "a_k": str(tmp_path / "a" / "k.cu"),
        "b_k": str(tmp_path / "b" / "k.cu"),
        "j": str(tmp_path / "a" / "j.cu"),
    }


def test_unique_names() -> None:
    names = unique_names(
        [Path("x/a/k.cu"), Path("x/b/k.cu"), Path("y.cu"), Path("a_k.cu"), Path("q/y.cu")]
    )
    # Files that share a name are named by their path below the folder they share;
    # a name that is still taken gets a suffix.
    assert names == ["a_k", "b_k", "y", "a_k-2", "q_y"]


def test_compiler_options_join_pairs_and_make_includes_absolute() -> None:
    options = compiler_options(["-I", "inc", "-D", "X=1", "-I/abs", "--include-path=rel", "-O3"])
    assert options == [
        f"-I{Path('inc').absolute()}",
        "-DX=1",
        "-I/abs",
        f"--include-path={Path('rel').absolute()}",
        "-O3",
    ]
    with pytest.raises(ValueError, match="-D needs a value"):
        compiler_options(["-D"])


def _macro_kernel() -> str:
    return (
        '#include "factor.h"\n'
        'extern "C" __global__ void scaled(float* x) { x[threadIdx.x] *= FACTOR * TILE; }\n'
    )


@pytest.mark.parametrize("backend", ["nvrtc", pytest.param("nvcc", marks=needs_nvcc)])
def test_extra_compiler_options(backend: str, tmp_path: Path) -> None:
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "factor.h").write_text("#define FACTOR 2.0f\n")
    (tmp_path / "k.cu").write_text(_macro_kernel())
    common = ["compile", "k.cu", "--arch", ARCH, "--backend", backend, "--json", "r.json", "-j1"]
    # -X=FLAG, and everything after a lone --; the relative -I works for nvcc too,
    # which compiles in a temporary folder of its own.
    for extra in (["-X=-Iinc", "-X=-DTILE=4"], ["--", "-I", "inc", "-DTILE=4"]):
        proc = asynccomp(*common, *extra, cache=tmp_path / "cache", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        (record,) = json.loads((tmp_path / "r.json").read_text())
        # The file's own folder first: `#include "x.h"` next to a file is found there.
        assert record["options"] == [f"-I{tmp_path}", f"-I{tmp_path / 'inc'}", "-DTILE=4"]
    proc = asynccomp(*common, "-X=-Iinc", cache=tmp_path / "cache", cwd=tmp_path)
    assert proc.returncode == 1 and "TILE" in proc.stderr  # the macro really came from us


def test_progress_bar_on_a_terminal(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"k{i}.cu").write_text(scale_kernel(float(i + 1)))
    (tmp_path / "broken.cu").write_text(broken_kernel())
    code, screen, stderr = asynccomp_on_terminal(
        "compile", str(tmp_path), "--arch", ARCH, "-j", "2", cache=tmp_path / "cache"
    )
    assert code == 1
    # One line redrawn in place: carriage returns, no line per job.
    redraws = screen.count("\r[")
    assert redraws >= 4, screen
    assert "[1/4]" not in screen
    assert "4/4 done, 1 failed, 0 cached" in screen
    assert ", ETA " in screen
    assert "FAILED broken (CompileError" in screen  # failures show up as they happen
    assert "4 jobs: 3 succeeded (3 compiled, 0 from the cache), 1 failed" in screen
    assert "undefined_identifier_42" in stderr and "Traceback" not in stderr


def test_examples_compile(tmp_path: Path) -> None:
    proc = asynccomp("compile", "--examples", "--arch", ARCH, cache=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    assert "0 failed" in proc.stdout


def test_cache_command(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    source = tmp_path / "k.cu"
    source.write_text(scale_kernel(17.0))
    for _ in range(2):  # a compile, then a hit from the disk tier
        assert asynccomp("compile", str(source), "--arch", ARCH, cache=cache).returncode == 0
    stats = asynccomp("cache", "stats", "--json", cache=cache)
    report = json.loads(stats.stdout)
    assert report["entries"] == 1 and report["bytes"] > 0
    assert (report["disk_hits"], report["misses"], report["stores"]) == (1, 1, 1)
    assert report["folder"].startswith(str(cache))
    assert asynccomp("cache", "path", cache=cache).stdout.strip() == str(cache)
    [entry] = cache.rglob("*.entry")
    entry.write_bytes(entry.read_bytes()[:-5] + b"oops!")
    verify = asynccomp("cache", "verify", cache=cache)
    assert verify.returncode == 1 and "checksum mismatch" in verify.stdout
    assert not entry.exists()
    assert asynccomp("cache", "verify", cache=cache).returncode == 0
    assert asynccomp("compile", str(source), "--arch", ARCH, cache=cache).returncode == 0
    cleared = asynccomp("cache", "clear", cache=cache)
    assert "removed 1 entries" in cleared.stdout
    assert json.loads(asynccomp("cache", "stats", "--json", cache=cache).stdout)["entries"] == 0


# -- the edges a newcomer meets -------------------------------------------------------------


def test_unwritable_outputs_fail_before_anything_compiles(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text(scale_kernel(21.0))
    cache = tmp_path / "cache"
    for args in (["--out", "/dev/null/out"], ["--json", "/proc/asynccomp-no.json"]):
        proc = asynccomp("compile", str(tmp_path / "k.cu"), "--arch", ARCH, *args, cache=cache)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("asynccomp: error: ")
        assert "cannot be written" in proc.stderr
        assert "Traceback" not in proc.stderr
    assert not list(cache.rglob("*.entry"))  # nothing was compiled


def test_ctrl_c_keeps_what_finished(tmp_path: Path) -> None:
    for i in range(2):
        (tmp_path / f"quick{i}.cu").write_text(scale_kernel(30.0 + i))
    for i in range(3):
        (tmp_path / f"slow{i}.cu").write_text(slow_kernel(20000 + i))
    report = tmp_path / "report.json"
    env = {**os.environ, "ASYNCCOMP_CACHE_DIR": str(tmp_path / "cache")}
    # One worker: the quick ones are estimated short, so a slow one runs first... give
    # the quick ones a head start with a second run of just them.
    assert (
        asynccomp(
            "compile",
            *(str(tmp_path / f"quick{i}.cu") for i in range(2)),
            "--arch",
            ARCH,
            cache=tmp_path / "cache",
        ).returncode
        == 0
    )
    with subprocess.Popen(
        [
            sys.executable,
            "-m",
            "asynccomp",
            "compile",
            str(tmp_path),
            "--arch",
            ARCH,
            "-j",
            "2",
            "--json",
            str(report),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        lines = []
        for line in proc.stdout:  # the two cached ones come back at once
            lines.append(line)
            if len([x for x in lines if x.startswith("[")]) == 2:
                break
        # The slow ones compile now: an NVRTC worker starts for each job in flight.
        deadline = time.monotonic() + 60
        while len(nvrtc_workers()) < 2:
            assert time.monotonic() < deadline, "the slow jobs never started"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        rest, errors = proc.communicate(timeout=60)
    assert proc.returncode == 130, errors
    assert "Traceback" not in errors and "KeyboardInterrupt" not in errors
    assert "asynccomp: interrupted" in rest
    assert "3 not run (interrupted)" in rest
    records = json.loads(report.read_text())
    assert len(records) == 5
    assert sorted(r["status"] for r in records) == ["cached", "cached", *["interrupted"] * 3]


def test_the_progress_bar_names_what_runs(tmp_path: Path) -> None:
    (tmp_path / "long_one.cu").write_text(slow_kernel(6000))
    code, screen, _ = asynccomp_on_terminal(
        "compile", str(tmp_path), "--arch", ARCH, cache=tmp_path / "cache"
    )
    assert code == 0
    assert "now: long_one" in screen
    assert "ETA 0:0" in screen


WARNS = 'extern "C" __global__ void w(float* x) { int unused = 1; x[0] = 1.f; }\n'


def test_warnings_are_counted_shown_and_kept(tmp_path: Path) -> None:
    (tmp_path / "warns.cu").write_text(WARNS)
    (tmp_path / "clean.cu").write_text(scale_kernel(41.0))
    cache = tmp_path / "cache"
    # --no-server -j 1: one compile after the other, so the two jobs cannot finish in the same
    # millisecond (on two workers they can, and did once in CI)
    plain = asynccomp(
        "compile",
        str(tmp_path),
        "--arch",
        ARCH,
        "--no-server",
        "-j",
        "1",
        "--json",
        "-",
        cache=cache,
    )
    assert plain.returncode == 0
    records = {r["name"]: r for r in json.loads(plain.stdout)}  # --json -: stdout is JSON
    assert records["warns"]["warnings_count"] == 1 and "unused" in records["warns"]["log"]
    assert records["clean"]["warnings_count"] == 0
    assert "1 warning" in plain.stderr and "warnings: in 1 job" in plain.stderr
    finished = {r["finished_at"] for r in records.values()}
    assert len(finished) == 2  # each record says when its own job finished
    verbose = asynccomp("compile", str(tmp_path), "--arch", ARCH, "-v", cache=cache)
    assert 'warning #177-D: variable "unused"' in verbose.stdout
    quiet = asynccomp("compile", str(tmp_path), "--arch", ARCH, "-q", cache=cache)
    assert "[1/2]" not in quiet.stdout and "2 jobs: 2 succeeded" in quiet.stdout


def test_a_file_that_is_not_utf8_is_compiled_as_it_is(tmp_path: Path) -> None:
    (tmp_path / "latin1.cu").write_bytes(
        scale_kernel(42.0).encode() + "// caf\xe9\n".encode("latin-1")
    )
    proc = asynccomp(
        "compile",
        str(tmp_path / "latin1.cu"),
        "--arch",
        ARCH,
        "--out",
        str(tmp_path / "o"),
        cache=tmp_path / "cache",
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "o" / "latin1.cubin").read_bytes()[:4] == b"\x7fELF"
    assert "1 job: 1 succeeded" in proc.stdout


def test_version_usage_and_doctor(tmp_path: Path) -> None:
    from asynccomp import __version__

    version = asynccomp("--version", cache=tmp_path)
    assert version.returncode == 0 and version.stdout.strip() == f"asynccomp {__version__}"
    bare = asynccomp(cache=tmp_path)
    assert bare.returncode == 2 and "usage: asynccomp" in bare.stdout and "compile" in bare.stdout
    doctor = asynccomp("doctor", "--json", cache=tmp_path)
    facts = json.loads(doctor.stdout)
    assert doctor.returncode == 0 and facts["asynccomp"] == __version__
    assert facts["nvrtc"]["version"] and facts["cache"]["folder"] == str(tmp_path)
    missing = asynccomp("doctor", "--arch", "sm_999", cache=tmp_path)
    assert missing.returncode == 1 and "PROBLEM: nvrtc does not support sm_999" in missing.stdout


def test_no_traceback_into_a_closed_pipe(tmp_path: Path) -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "asynccomp", "doctor"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "ASYNCCOMP_CACHE_DIR": str(tmp_path)},
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # as `| head -0` would
        errors = proc.stderr.read().decode()
        proc.wait(timeout=60)
    assert "Traceback" not in errors and "BrokenPipe" not in errors


def test_a_broken_pipe_of_our_own_is_not_taken_for_a_closed_stdout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pipe to a worker or a server that breaks mid-command is a failure with a
    traceback, not the silent exit 1 of ``| head`` (which once hid why CI failed)."""
    from asynccomp.cli import _doctor

    def broken(args: object) -> int:
        raise BrokenPipeError(32, "a worker's pipe")

    monkeypatch.setattr(_doctor, "run", broken)
    with pytest.raises(BrokenPipeError, match="a worker's pipe"):
        cli_main(["doctor"])


def test_a_missing_nvcc_is_said_once(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"k{i}.cu").write_text(scale_kernel(50.0 + i))
    # A machine without nvcc: none on PATH, in the usual folders or as a wheel.
    hide = (
        "import asynccomp.toolkit as t; t.DEFAULT_ROOTS = (); "
        "t.discover_toolkit.__kwdefaults__['use_wheels'] = False; "
        "from asynccomp.cli import main; raise SystemExit(main())"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_PATH", "CUDA_HOME")}
    env["PATH"] = f"{Path(sys.executable).parent}:/usr/bin:/bin"
    env["ASYNCCOMP_CACHE_DIR"] = str(tmp_path / "cache")
    proc = subprocess.run(
        [sys.executable, "-c", hide, "compile", str(tmp_path), "--arch", ARCH, "--backend", "nvcc"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stderr.count("nvcc was not found") == 1, proc.stderr
    assert "--- 3 jobs (k0, k1, k2)" in proc.stderr
    assert "pip install nvidia-cuda-nvcc nvidia-cuda-crt" in proc.stderr


@pytest.mark.parametrize(
    ("given", "size", "shown"),
    [
        ("5G", 5 * 10**9, "5.0 GB"),  # as ccache: G is 10^9 ...
        ("5GB", 5 * 10**9, "5.0 GB"),
        ("5GiB", 5 * 2**30, "5.0 GiB"),  # ... and Gi 2^30
        ("5Gi", 5 * 2**30, "5.0 GiB"),
        ("1.5G", 1_500_000_000, "1.5 GB"),
        ("500M", 500 * 10**6, "500.0 MB"),
        ("512MiB", 512 * 2**20, "512.0 MiB"),
        ("800K", 800_000, "800.0 KB"),
        ("999", 999, "999 B"),
    ],
)
def test_sizes_are_shown_in_the_units_they_were_given_in(given: str, size: int, shown: str) -> None:
    from asynccomp.cache._settings import format_size, parse_size

    assert parse_size(given) == size and format_size(size) == shown
    assert parse_size(shown) == size  # what is shown reads back as the same size


def test_cache_max_size_shows_back_what_was_given(tmp_path: Path) -> None:
    """``cache -M 5G`` then ``cache stats`` shows "of 5.0 GB" (it showed "of 4.65661 GiB")."""
    cache = tmp_path / "cache"
    assert "of 4.0 GiB (the default)" in asynccomp("cache", "stats", cache=cache).stdout
    stored = asynccomp("cache", "-M", "5G", cache=cache)
    assert stored.returncode == 0, stored.stderr
    assert stored.stdout.startswith("max size 5.0 GB (5000000000 bytes) stored in")
    size = next(
        line
        for line in asynccomp("cache", cache=cache).stdout.splitlines()
        if line.startswith("size ")
    )
    assert size == "size             0 B of 5.0 GB (settings.json in the cache folder)"
    assert asynccomp("cache", "-M", "5GiB", cache=cache).returncode == 0
    assert "0 B of 5.0 GiB (settings.json" in asynccomp("cache", cache=cache).stdout
    help_text = " ".join(asynccomp("cache", "--help", cache=cache).stdout.split())
    assert "5G = 5 x 10^9 bytes, 5GiB = 5 x 2^30" in help_text


def test_every_progress_frame_has_the_same_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bar, counts and clocks keep their places from frame to frame: 9/120 and
    120/120, 0:05 and 1:01:05, no ETA and an ETA all take the same room."""
    import io

    from asynccomp import CompileJob, CompileResult
    from asynccomp.cli._progress import Estimates, ProgressBar
    from asynccomp.errors import CompileError

    monkeypatch.setenv("COLUMNS", "120")
    jobs = [CompileJob(scale_kernel(float(i)), name=f"k{'x' * (i % 7)}{i}") for i in range(120)]
    running: list[tuple[CompileJob, float]] = []
    stream = io.StringIO()
    bar = ProgressBar(
        len(jobs),
        stream,
        estimates=Estimates({job: 0.5 + i for i, job in enumerate(jobs)}, workers=4),
        running=lambda: running,
    )
    frames = [bar.line(now=bar.started + t) for t in (0.0, 5.0, 65.0, 3665.0)]
    for i, job in enumerate(jobs):
        running[:] = [(j, 0.1 * k) for k, j in enumerate(jobs[i : i + 1 + i % 5])]
        failed = i % 11 == 3
        bar.job_done(
            CompileResult(
                job,
                "cubin",
                ARCH,
                None if failed else b"\0" * 8,
                error=CompileError("boom") if failed else None,
                elapsed=0.01 * i,
                cached=i % 3 == 0,
            )
        )
        frames.append(bar.line(now=bar.started + i * 37.0))
    assert {len(frame) for frame in frames} == {119}  # the terminal's width, less one
    for field in ("] ", " done, ", " failed, ", " cached, ETA ", ", now: "):
        assert len({f.index(field) for f in frames if field in f}) == 1, field
    # What went to the terminal: every redraw of the bar as wide.
    redraws = [chunk for chunk in stream.getvalue().split("\r") if chunk.startswith("[")]
    assert len(redraws) > len(jobs) and {len(chunk) for chunk in redraws} == {119}


def test_the_summary_counts_only_the_compiles_that_ran(tmp_path: Path) -> None:
    """A job answered by an identical job's compile, or by the cache, ran no compile:
    the compile time is summed over the compiles that ran, and says how many."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(2):
        (src / f"k{i}.cu").write_text(scale_kernel(float(i + 1)))
    (src / "copy.cu").write_text((src / "k0.cu").read_text())
    cache = tmp_path / "cache"
    first = asynccomp("compile", str(src), "--arch", ARCH, "--no-server", cache=cache)
    assert first.returncode == 0, first.stderr
    assert "3 succeeded (2 compiled, 0 from the cache, 1 deduplicated)" in first.stdout
    assert "summed over the 2 compiles that ran (" in first.stdout
    slowest = first.stdout.split("slowest jobs", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    assert len(slowest) == 2  # the shared answer is not a compile of its own
    (src / "k2.cu").write_text(scale_kernel(3.0))
    second = asynccomp("compile", str(src), "--arch", ARCH, "--no-server", cache=cache)
    assert "4 succeeded (1 compiled, 3 from the cache)" in second.stdout
    assert "summed over the 1 compile that ran (" in second.stdout
