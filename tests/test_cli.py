"""The command line, through a subprocess as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .kernels import ARCH, broken_kernel, scale_kernel


def asynccomp(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ASYNCCOMP_CACHE_DIR": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "asynccomp", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


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
    assert all(r["status"] == "ok" and r["resources"]["scale"]["registers"] > 0 for r in records)
    assert "3 compiled" in proc.stdout and "[3/3]" in proc.stdout  # plain lines: no TTY


def test_failure_exits_1_with_diagnostics(tmp_path: Path) -> None:
    (tmp_path / "bad.cu").write_text(broken_kernel())
    (tmp_path / "good.cu").write_text(scale_kernel())
    proc = asynccomp("compile", str(tmp_path), "--arch", ARCH, cache=tmp_path / "cache")
    assert proc.returncode == 1
    assert "undefined_identifier_42" in proc.stderr
    assert "1 compiled" in proc.stdout and "1 failed" in proc.stdout


def test_usage_errors_exit_2_in_one_line(tmp_path: Path) -> None:
    for args in (
        ["compile", str(tmp_path / "missing.cu")],
        ["compile", "--bogus"],
        ["compile", "--examples", "--arch", "sm90"],
    ):
        proc = asynccomp(*args, cache=tmp_path / "cache")
        assert proc.returncode == 2, args
        assert proc.stderr.startswith("asynccomp: error:") and "Traceback" not in proc.stderr


def test_examples_compile(tmp_path: Path) -> None:
    proc = asynccomp("compile", "--examples", "--arch", ARCH, cache=tmp_path / "cache")
    assert proc.returncode == 0, proc.stderr
    assert "0 failed" in proc.stdout
