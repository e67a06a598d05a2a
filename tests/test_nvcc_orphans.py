"""nvcc dies with its engine: an engine's process (the command line, the compile server)
killed by SIGKILL or SIGTERM while nvcc compiles leaves no nvcc, cicc or ptxas running
(orphans ran on for 12-41 s, issue 20), and the work folder it could not remove is swept
by the next engine to start. Real processes, real signals, real nvcc."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

from asynccomp import CompileJob, ServerLost, SyncEngine
from asynccomp.backends._workdirs import make_work_folder, sweep_work_folders

from .kernels import ARCH, needs_nvcc, scale_kernel, slow_kernel
from .servers import running_server, server_folder, wait_gone

_TOOLS = ("nvcc", "cicc", "ptxas")


def _tools_below(process: psutil.Process) -> list[psutil.Process]:
    """nvcc (and its guard) and its tools below ``process``."""
    found = []
    for child in process.children(recursive=True):
        try:
            if any(tool in " ".join(child.cmdline()) for tool in _TOOLS):
                found.append(child)
        except psutil.Error:
            pass
    return found


def _names(processes: list[psutil.Process]) -> set[str]:
    names = set()
    for process in processes:
        try:
            names.add(process.name())
        except psutil.Error:
            pass
    return names


def _wait_for_cicc(process: psutil.Process) -> list[psutil.Process]:
    """Once cicc runs below ``process`` (nvcc's long step): every compiler process there."""
    deadline = time.monotonic() + 60
    while True:
        below = _tools_below(process)
        names = _names(below)
        if "cicc" in names:
            return below
        assert time.monotonic() < deadline, f"cicc never started (saw {names})"
        assert process.is_running(), "the engine's process ended first"
        time.sleep(0.02)


def _all_gone(processes: list[psutil.Process], within: float) -> list[str]:
    """The processes still running after ``within`` seconds (zombies have ended)."""
    return [f"{p.pid} {_names([p])}" for p in processes if not wait_gone(p.pid, within)]


@pytest.fixture
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A temporary folder of the test's, for the engines below it and for this one."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def _next_engine_sweeps(folder: Path) -> None:
    with SyncEngine(arch=ARCH, cache=False):
        deadline = time.monotonic() + 15
        while folder.exists():
            assert time.monotonic() < deadline, f"{folder} was not swept"
            time.sleep(0.02)


# An engine in a script of its own: SIGTERM's default action ends it on the spot.
SCRIPT = f"""
import anyio
from asynccomp import CompileJob, Engine

async def main() -> None:
    async with Engine(arch="{ARCH}", cache=False) as engine:
        await engine.compile(CompileJob(open("slow.cu").read(), backend="nvcc"))

anyio.run(main)
"""
# The command line: it stops cleanly on SIGTERM (exit status 130) as on Ctrl-C.
COMMAND = ["-m", "asynccomp", "compile", "slow.cu", "--arch", ARCH, "--backend", "nvcc"]
COMMAND += ["--no-server", "--no-cache"]


@needs_nvcc
@pytest.mark.parametrize(
    ("argv", "how", "status"),
    [
        (["-c", SCRIPT], signal.SIGKILL, -signal.SIGKILL),
        (["-c", SCRIPT], signal.SIGTERM, -signal.SIGTERM),
        (COMMAND, signal.SIGKILL, -signal.SIGKILL),
        (COMMAND, signal.SIGTERM, 130),
    ],
    ids=["script-SIGKILL", "script-SIGTERM", "cli-SIGKILL", "cli-SIGTERM"],
)
def test_a_killed_engine_leaves_no_compiler_running(
    argv: list[str], how: signal.Signals, status: int, work: Path, tmp_path: Path
) -> None:
    (tmp_path / "slow.cu").write_text(slow_kernel())
    engine = subprocess.Popen(
        [sys.executable, *argv], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        compilers = _wait_for_cicc(psutil.Process(engine.pid))
        engine.send_signal(how)
        _, said = engine.communicate(timeout=30)
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait()
    assert engine.returncode == status, said
    assert _all_gone(compilers, 30) == []
    left = list(work.glob(f"asynccomp-nvcc-{engine.pid}-*"))
    if status > 0:
        assert left == []  # it stopped cleanly, and removed its own
        return
    # Its work folder stayed (nothing ran to remove it), until the next engine starts.
    [folder] = left
    _next_engine_sweeps(folder)


@needs_nvcc
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_killed_server_leaves_no_compiler_running(how: signal.Signals, work: Path) -> None:
    with (
        server_folder() as folder,
        running_server(folder, "--idle-timeout", "0") as (server, paths),
    ):
        errors: list[BaseException | None] = []

        def client() -> None:
            with SyncEngine(arch=ARCH, server=str(paths.socket)) as engine:
                job = CompileJob(slow_kernel(), backend="nvcc", name="victim")
                errors.append(engine.compile(job).error)

        thread = threading.Thread(target=client)
        thread.start()
        try:
            compilers = _wait_for_cicc(psutil.Process(server.pid))
            server.send_signal(how)
            server.wait(30)
        finally:
            thread.join(60)
    assert [type(e) for e in errors] == [ServerLost]
    assert _all_gone(compilers, 30) == []
    left = list(work.glob(f"asynccomp-nvcc-{server.pid}-*"))
    if how == signal.SIGTERM:
        assert left == []  # a clean stop removes its own
    else:
        [folder_left] = left
        _next_engine_sweeps(folder_left)


@needs_nvcc
def test_a_compile_still_works_and_leaves_nothing(work: Path) -> None:
    with SyncEngine(arch=ARCH, cache=False) as engine:
        result = engine.compile(CompileJob(scale_kernel(), backend="nvcc"))
    assert result.ok, result.error
    # Nothing but the empty folder NVRTC's template runs in (started with the engine).
    left = list(work.iterdir())
    assert [p.name for p in left] in ([], [f"asynccomp-empty-{os.getuid()}"])
    assert all(list(p.iterdir()) == [] for p in left)


def test_the_sweep_takes_only_this_users_folders_of_ended_processes(work: Path) -> None:
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)  # fmt: skip
    dead = int(ended.stdout)
    stale = work / f"asynccomp-nvcc-{dead}-abcd1234"
    stale_keep = work / f"asynccomp-keep-{dead}-abcd1234"
    for folder in (stale, stale_keep):
        (folder / "deep").mkdir(parents=True)
        (folder / "deep" / "tmpxft_0001.ii").write_bytes(b"x" * 1000)
    mine = make_work_folder("nvcc")  # this process is running
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        theirs_alive = work / f"asynccomp-nvcc-{alive.pid}-abcd1234"
        theirs_alive.mkdir()
        other_user = work / f"asynccomp-nvcc-{dead}-otheruser"
        other_user.mkdir()
        if os.geteuid() == 0:  # else the folder stands for itself: this user's, but kept
            os.chown(other_user, 54321, 54321)
        target = work / "target"
        target.mkdir()
        link = work / f"asynccomp-nvcc-{dead}-alink"
        link.symlink_to(target)
        unrelated = work / f"asynccomp-empty-{dead}-x"
        unrelated.mkdir()
        removed = sweep_work_folders()
    finally:
        alive.kill()
        alive.wait()
    assert sorted(removed) == sorted([stale.name, stale_keep.name])
    assert not stale.exists() and not stale_keep.exists()
    for kept in (mine, theirs_alive, other_user, link, target, unrelated):
        assert kept.exists() or kept.is_symlink(), kept
    # The process has ended since: now its folder goes too, and a zombie counts as ended.
    assert sweep_work_folders() == [theirs_alive.name]
