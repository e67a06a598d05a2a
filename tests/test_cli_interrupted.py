"""``asynccomp compile`` stopped by Ctrl-C, and two runs at once: every dump folder says
what became of its job, and no run loses another's ``--json`` records."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from .kernels import ARCH, scale_kernel, slow_kernel


def _compile(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "asynccomp", "compile", *args, "--arch", ARCH, "--no-server"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_ctrl_c_marks_every_unfinished_dump_interrupted(tmp_path: Path) -> None:
    src, dumps, report = tmp_path / "src", tmp_path / "dumps", tmp_path / "report.json"
    src.mkdir()
    env = {**os.environ, "ASYNCCOMP_CACHE_DIR": str(tmp_path / "cache")}
    for i in range(12):  # a few seconds each, one at a time
        (src / f"k{i:02d}.cu").write_text(slow_kernel(4000 + i))
    with _compile(
        str(src), "-j", "1", "--dump", str(dumps), "--json", str(report), env=env
    ) as proc:
        assert proc.stdout is not None
        finished = 0
        for line in proc.stdout:  # wait on output: two results are out
            finished += line.startswith("[")
            if finished == 2:
                break
        proc.send_signal(signal.SIGINT)
        rest, errors = proc.communicate(timeout=120)
    assert proc.returncode == 130, errors
    assert "Traceback" not in errors
    folders = sorted(str(p) for p in dumps.iterdir() if p.is_dir())
    assert len(folders) == 12
    statuses = {}
    for folder in folders:
        record = json.loads((Path(folder) / "result.json").read_text())  # every folder has one
        statuses[record["name"]] = record["status"]
    lines = (dumps / "manifest.jsonl").read_text().splitlines()
    manifest = [json.loads(line) for line in lines]
    assert sorted(r["folder"] for r in manifest) == folders  # one line per folder
    assert {r["name"]: r["status"] for r in manifest} == statuses
    # The dumps agree with what the run reported: the jobs it did not finish are
    # interrupted in both.
    reported = {r["name"]: r["status"] for r in json.loads(report.read_text())}
    assert reported == statuses
    interrupted = sorted(name for name, status in statuses.items() if status == "interrupted")
    assert len(interrupted) >= 1 and f"{len(interrupted)} not run (interrupted)" in rest
    assert all(status == "ok" for status in statuses.values() if status != "interrupted")


def test_two_runs_writing_one_json_file_keep_both(tmp_path: Path) -> None:
    env = {**os.environ, "ASYNCCOMP_CACHE_DIR": str(tmp_path / "cache")}
    report = tmp_path / "report.json"
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "fast.cu").write_text(scale_kernel(50.0))
    (tmp_path / "b" / "long.cu").write_text(slow_kernel(3000))
    report.write_text("[]\n")  # yesterday's report: replaced, as a re-run expects
    # The long run starts first and finishes last: the quick one writes in between.
    with _compile(str(tmp_path / "b"), "--json", str(report), env=env) as first:
        assert first.stdout is not None
        second = _compile(str(tmp_path / "a"), "--json", str(report), env=env)
        _, second_errors = second.communicate(timeout=300)
        assert second.returncode == 0, second_errors
        assert [r["name"] for r in json.loads(report.read_text())] == ["fast"]
        assert first.poll() is None, "the long run must still be compiling"
        _, first_errors = first.communicate(timeout=300)
    assert first.returncode == 0, first_errors
    assert [r["name"] for r in json.loads(report.read_text())] == ["fast", "long"]
    assert (
        f"asynccomp: note: {report} was written by another run while this one compiled: its "
        "1 records are kept, this run's 1 added after them" in first_errors
    )
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    # A run alone replaces what was there.
    with _compile(str(tmp_path / "a"), "--json", str(report), env=env) as again:
        again.communicate(timeout=300)
    assert again.returncode == 0
    assert [r["name"] for r in json.loads(report.read_text())] == ["fast"]
