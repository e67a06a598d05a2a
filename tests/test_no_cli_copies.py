"""No code path of the command line starts a copy of the command line.

Issue 20: a ``compile --ray auto`` run on a head started with ``ray start --head``,
whose parent was killed, left a chain of over 100 ``python -m asynccomp compile ...
--ray auto`` processes, each the parent of the next, each in a session of its own: the
shape of a fork that never execs and calls setsid (the old ``serve --detach`` did
exactly that in process), or of a ``__main__`` that runs the command again when imported
(multiprocessing's spawn and forkserver import it; ``asynccomp/__main__.py`` was
unguarded). Both are gone; Ray 2.60 neither forks nor imports a driver's ``__main__``.
These tests keep it so, on a real head: the command line directly, and through a
compile server (``serve --detach``) fronting the head; the command's parent is killed
mid-run, and no process with the command's command line is ever below it, or left after
it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from asynccomp.server import server_paths

from .kernels import ARCH, slow_kernel
from .ray_cluster import RAY_ROOT, LocalHead, actor_processes, needs_ray
from .servers import server_folder, server_pid

pytestmark = [needs_ray, pytest.mark.ray]


@pytest.fixture(scope="module")
def head() -> Iterator[LocalHead]:
    # Short: Ray's socket paths live under it (a Unix socket's path is limited).
    folder = Path(tempfile.mkdtemp(prefix="rh-", dir=RAY_ROOT))
    try:
        started = LocalHead(folder)
        try:
            yield started
        finally:
            started.stop()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _with_line(words: list[str]) -> list[psutil.Process]:
    """The processes whose command line holds all of ``words``."""
    found = []
    for process in psutil.process_iter():
        try:
            line = " ".join(process.cmdline())
            if all(word in line for word in words):
                found.append(process)
        except psutil.Error:
            pass
    return found


def _run_orphaned(command: str, env: dict[str, str], cwd: Path, marker: str) -> None:
    """Run ``command`` under a shell, kill the shell once the command's compile actors
    work, and watch the command until it ends: never a second process with its command
    line (``marker`` is in it), neither below it nor anywhere."""
    shell = subprocess.Popen(
        ["bash", "-c", f"{command}; echo done"], env=env, cwd=cwd, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        while not (mine := [p for p in _with_line([marker]) if p.pid != shell.pid]):
            assert shell.poll() is None and time.monotonic() < deadline, "it never started"
            time.sleep(0.05)
        [command_line] = mine
        while not actor_processes() and command_line.is_running():
            assert time.monotonic() < deadline, "no compile actor ever started"
            time.sleep(0.05)
        shell.send_signal(signal.SIGKILL)  # its parent is killed mid-run
        shell.wait()
        while command_line.is_running() and command_line.status() != psutil.STATUS_ZOMBIE:
            copies = [p.pid for p in _with_line([marker]) if p.pid != command_line.pid]
            assert copies == [], f"copies of {command}: {copies}"
            assert time.monotonic() < deadline, "the command never ended"
            time.sleep(0.05)
        assert _with_line([marker]) == []
    finally:
        if shell.poll() is None:
            shell.kill()
            shell.wait()
        for left in _with_line([marker]):
            left.kill()


def _sources(folder: Path) -> list[str]:
    names = []
    for i in range(4):  # two rounds on the head's two CPUs, a few seconds each
        (folder / f"copies{i}.cu").write_text(slow_kernel(6000 + i))
        names.append(f"copies{i}.cu")
    return names


def test_the_command_line_on_a_head_never_runs_a_copy_of_itself(
    head: LocalHead, tmp_path: Path
) -> None:
    names = _sources(tmp_path)
    command = f"{sys.executable} -m asynccomp compile {' '.join(names)} --arch {ARCH} "
    command += "--ray auto --no-cache --out bin"
    env = {**head.env, "ASYNCCOMP_SERVER": "off"}
    _run_orphaned(command, env, tmp_path, "copies0.cu")
    # It went on without its parent, on the head, to the end.
    assert sorted(p.name for p in (tmp_path / "bin").iterdir()) == [
        f"copies{i}.cubin" for i in range(4)
    ]


def test_a_server_fronting_a_head_never_runs_a_copy_of_anything(
    head: LocalHead, tmp_path: Path
) -> None:
    names = _sources(tmp_path)
    with server_folder() as folder:
        env = {**head.env, "ASYNCCOMP_SERVER_DIR": str(folder)}
        serve = [sys.executable, "-m", "asynccomp", "serve", "--detach", "--ray", "auto"]
        serve += ["--idle-timeout", "0", "--server-dir", str(folder)]
        subprocess.run(serve, env=env, check=True, timeout=120, capture_output=True)
        pid = server_pid(server_paths(folder))
        assert pid is not None
        command = f"{sys.executable} -m asynccomp compile {' '.join(names)} --arch {ARCH} "
        command += "--server --out bin"
        _run_orphaned(command, env, tmp_path, "copies0.cu")
        # One server, never a copy of it either.
        assert [p.pid for p in _with_line(["asynccomp", "serve", str(folder)])] == [pid]
        assert sorted(p.name for p in (tmp_path / "bin").iterdir()) == [
            f"copies{i}.cubin" for i in range(4)
        ]
        assert os.getsid(pid) == pid  # the detached server: a session of its own
