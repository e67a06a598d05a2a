"""asynccomp._os, the one module of OS plumbing: one rule for whether a process runs,
one sweep for every folder named after a process, the socket probe, and what a child
interpreter is started with."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from asynccomp import _os
from asynccomp.backends._nvrtc_files import sweep_stale_auto_pch, sweep_worker_folders
from asynccomp.backends._workdirs import sweep_work_folders

from .processes import bare_environ
from .servers import server_folder

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def ended() -> Iterator[int]:
    """A child that has exited and is not yet reaped: a zombie until the test ends."""
    child = subprocess.Popen(["true"])
    try:
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # ended, still there
        yield child.pid
    finally:
        child.wait()


def test_a_zombie_has_ended(ended: int) -> None:
    assert Path(f"/proc/{ended}").exists()  # still a process to the kernel
    assert not _os.running(ended)
    assert _os.running(os.getpid())


def test_a_process_reaped_between_the_two_looks_has_ended(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``running`` asks ``kill(pid, 0)``, then ``/proc/<pid>/stat``: a process reaped in
    between has no stat left to read, and has ended (a GPU run of the suite met that
    race in a test that asked twice)."""
    monkeypatch.setattr(_os, "_state", lambda pid: None)  # its stat gone after the kill
    assert not _os.running(os.getpid())


def test_a_stopped_process_runs_and_is_stopped() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        assert not _os.stopped(child.pid)
        os.kill(child.pid, signal.SIGSTOP)
        os.waitid(os.P_PID, child.pid, os.WSTOPPED | os.WNOWAIT)
        assert _os.stopped(child.pid) and _os.running(child.pid)
        assert _os.rss(child.pid) > 0
    finally:
        child.kill()
        child.wait()
    assert not _os.stopped(child.pid) and _os.rss(child.pid) == 0  # gone


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    return int(done.stdout)


Sweep = Callable[[Path], list[str]]
SWEEPS: dict[str, tuple[str, Sweep]] = {
    # name pattern of a dead process's folder -> the sweep that removes it
    "nvcc work folders": (
        "asynccomp-nvcc-{pid}-abcd123{n}",
        lambda root: sweep_work_folders(str(root)),
    ),
    "NVRTC worker folders": ("{pid}-{n}", sweep_worker_folders),
    "NVRTC auto PCH": ("__nvrtc_auto_pch_{pid}_{n}", sweep_stale_auto_pch),
}


@pytest.mark.parametrize("kind", sorted(SWEEPS))
def test_every_sweep_takes_only_this_users_folders_of_ended_processes(
    kind: str, tmp_path: Path
) -> None:
    """One rule for every sweep: a real folder (never a link) of this user's whose
    process has ended. The NVRTC worker folders' sweep took anything of that name in its
    root before (another user's folder, a link), the others did not."""
    name, sweep = SWEEPS[kind]
    dead = _dead_pid()
    stale = tmp_path / name.format(pid=dead, n=0)
    (stale / "deep").mkdir(parents=True)
    (stale / "deep" / "file").write_bytes(b"x" * 100)
    mine = tmp_path / name.format(pid=os.getpid(), n=0)
    mine.mkdir()
    dead_too = _dead_pid()
    target = tmp_path / "target"
    target.mkdir()
    link = tmp_path / name.format(pid=dead_too, n=0)
    link.symlink_to(target)
    kept = [mine, link, target]
    if os.geteuid() == 0:  # only root can give a folder to another user
        other = tmp_path / name.format(pid=dead, n=1)
        other.mkdir()
        os.chown(other, 54321, 54321)
        kept.append(other)
    assert sweep(tmp_path) == [stale.name]
    assert not stale.exists()
    for path in kept:
        assert path.exists() or path.is_symlink(), path


def test_listening_is_a_socket_that_accepts() -> None:
    with server_folder() as folder:  # short: tmp_path may be too deep for a socket
        path = folder / "s"
        assert not _os.listening(path)  # nothing there
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as bound:
            bound.bind(str(path))
            assert not _os.listening(path)  # bound, not listening
            bound.listen()
            assert _os.listening(path)
        assert not _os.listening(path)  # closed: the file stays, nobody answers


def test_a_child_environment_puts_this_asynccomp_first_and_keeps_the_given_path(
    tmp_path: Path,
) -> None:
    given = {"PYTHONPATH": f"relative{os.pathsep}{tmp_path}", "OTHER": "1"}
    env = _os.child_environ(given, TMPDIR="/x")
    entries = env["PYTHONPATH"].split(os.pathsep)
    assert entries == [str(REPO), str(Path("relative").absolute()), str(tmp_path)]
    assert env["OTHER"] == "1" and env["TMPDIR"] == "/x"
    assert "OTHER" not in _os.child_environ({})


def test_a_bare_test_environment_still_imports_what_pythonpath_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tests' environment of almost nothing (a CLI run with ``HOME`` elsewhere)
    keeps ``$PYTHONPATH``'s folders: where the GPU machine's wheels live (a ``pip
    --target`` folder), which such a child lost (``platformdirs`` missing)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "only_on_the_path.py").write_text("WHERE = 'site'\n")
    monkeypatch.setenv("PYTHONPATH", f"{os.environ.get('PYTHONPATH', '')}{os.pathsep}{site}")
    code = "import only_on_the_path, platformdirs, asynccomp; print(asynccomp.__file__)"
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=bare_environ(HOME=str(tmp_path)),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(str(REPO / "asynccomp"))


def test_a_warm_worker_imports_the_asynccomp_its_parent_runs(tmp_path: Path) -> None:
    """A parent that found asynccomp through ``sys.path`` alone (a copy nobody
    installed, as the benchmarks import a checkout) starts warm workers that import
    that copy too, not another one installed (or none: the worker could not start)."""
    copy = tmp_path / "copy"
    shutil.copytree(REPO / "asynccomp", copy / "asynccomp",
                    ignore=shutil.ignore_patterns("__pycache__", "examples"))  # fmt: skip
    code = (
        f"import sys; sys.path.insert(0, {str(copy)!r})\n"
        "import asynccomp\n"
        "from asynccomp.workers import PoolSettings, WorkerPool\n"
        "pool = WorkerPool(PoolSettings('copy', 1, start_timeout=120))\n"
        "try:\n"
        "    [result] = pool.map(eval, [(\"__import__('asynccomp').__file__\",)])\n"
        "finally:\n"
        "    pool.close()\n"
        "print(result.outcome, result.value, asynccomp.__file__)\n"
    )
    # Not this checkout on the path (the tests put it first), but what else is there:
    # where the environment's packages live on some machines (a --target folder).
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    others = [
        entry
        for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep)
        if entry and Path(entry).resolve() != REPO
    ]
    if others:
        env["PYTHONPATH"] = os.pathsep.join(others)
    done = subprocess.run([sys.executable, "-c", code], cwd=tempfile.gettempdir(), env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    outcome, theirs, mine = done.stdout.split()
    assert outcome == "done" and mine.startswith(str(copy)), done.stdout
    assert theirs == mine
