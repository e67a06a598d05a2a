"""``asynccomp compile`` walking real folders: what it cannot use is skipped, one line
each, the rest compiles, and the exit status (3) says something was skipped."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from asynccomp.cli._compile_run import SKIPPED

from .kernels import ARCH, scale_kernel


def as_a_user(argv: list[str]) -> list[str]:
    """``argv`` bound by permission bits as a user is, root too: as root it runs under
    ``setpriv``, which drops the capabilities that let root read any folder before it
    execs ``argv``. (Not ``preexec_fn``: Python code between fork and exec in a process
    with threads, as a test process has, can deadlock or leave the child broken; a
    child of it once exited 1 with nothing said.)"""
    if os.geteuid() != 0:
        return argv
    setpriv = shutil.which("setpriv")
    if setpriv is None:  # pragma: no cover - util-linux is on every Debian
        pytest.skip("root, and no setpriv (util-linux) to drop CAP_DAC_OVERRIDE with")
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search", *argv]


def compile_as_a_user(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    """``python -m asynccomp compile ARGS`` bound by permission bits (as root too)."""
    env = {**os.environ, "ASYNCCOMP_CACHE_DIR": str(cache)}
    command = [sys.executable, "-m", "asynccomp", "compile", *args, "--arch", ARCH, "--no-server"]
    return subprocess.run(
        as_a_user(command),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[Path]:
    """A folder holding a kernel that this user (root without DAC override) cannot list."""
    folder = tmp_path / "src" / "locked"
    folder.mkdir(parents=True)
    (folder / "hidden.cu").write_text(scale_kernel(9.0))
    folder.chmod(0)
    probe = subprocess.run(as_a_user(["ls", str(folder)]), capture_output=True, check=False)
    if probe.returncode == 0:
        pytest.skip("permission bits do not bind this user here")
    yield folder
    folder.chmod(0o755)


def test_what_cannot_be_used_is_skipped_one_line_each(tmp_path: Path, locked: Path) -> None:
    src = locked.parent
    (src / "a.cu").write_text(scale_kernel(1.0))
    (src / "sub").mkdir()
    (src / "sub" / "b.cu").write_text(scale_kernel(2.0))
    (src / "d.cu").mkdir()  # a folder named like a kernel is a folder
    (src / "d.cu" / "c.cu").write_text(scale_kernel(3.0))
    os.mkfifo(src / "x.cu")  # reading it would block forever
    (src / "dangling.cu").symlink_to("nowhere.cu")
    (src / "self.cu").symlink_to("self.cu")
    (src / "sub" / "loop").symlink_to("..")
    out = tmp_path / "out"
    proc = compile_as_a_user(str(src), "--out", str(out), cache=tmp_path / "cache")
    assert "Traceback" not in proc.stderr
    assert proc.returncode == SKIPPED, proc
    assert sorted(p.name for p in out.iterdir()) == ["a.cubin", "b.cubin", "c.cubin"]
    skipped = sorted(line for line in proc.stderr.splitlines() if "skipped" in line)
    assert skipped == [
        f"asynccomp: skipped {src}/dangling.cu: a link to nothing (its target does not exist)",
        f"asynccomp: skipped {src}/locked: cannot list this folder (Permission denied)",
        f"asynccomp: skipped {src}/self.cu: a link that leads back to itself (a loop)",
        f"asynccomp: skipped {src}/sub/loop: a link back to a folder being walked (a loop)",
        f"asynccomp: skipped {src}/x.cu: not a regular file (a FIFO), not read",
    ]
    assert "3 jobs: 3 succeeded" in proc.stdout
    assert "5 inputs skipped (named above, not compiled)" in proc.stdout


def test_an_unreadable_folder_on_the_command_line_is_named(tmp_path: Path, locked: Path) -> None:
    proc = compile_as_a_user(str(locked), cache=tmp_path / "cache")
    assert proc.returncode == 2, proc
    assert proc.stderr.splitlines() == [
        f"asynccomp: skipped {locked}: cannot list this folder (Permission denied)",
        "asynccomp: error: nothing to compile: give .cu files, folders, or --examples",
    ]
    # With something else to compile, the rest compiles and the status says so.
    (tmp_path / "k.cu").write_text(scale_kernel(4.0))
    proc = compile_as_a_user(str(locked), str(tmp_path / "k.cu"), cache=tmp_path / "cache")
    assert proc.returncode == SKIPPED, proc
    assert "1 job: 1 succeeded" in proc.stdout


def test_an_unreadable_file_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "good.cu").write_text(scale_kernel(5.0))
    secret = tmp_path / "secret.cu"
    secret.write_text(scale_kernel(6.0))
    secret.chmod(0)
    proc = compile_as_a_user(str(tmp_path), cache=tmp_path / "cache")
    if os.access(secret, os.R_OK) and proc.returncode == 0:  # pragma: no cover
        pytest.skip("permission bits do not bind this user here")
    assert proc.returncode == SKIPPED, proc
    assert f"asynccomp: skipped {secret}: cannot be read (Permission denied)" in proc.stderr
    assert "1 job: 1 succeeded" in proc.stdout
