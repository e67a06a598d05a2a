"""Looking at the processes a test started, or left behind; running the command line."""

from __future__ import annotations

import site
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import anyio
import psutil

from asynccomp._os import python_path, running

__all__ = (
    "NVRTC_TEMPLATE",
    "NVRTC_WORKER",
    "bare_environ",
    "compiler_processes",
    "nvrtc_workers",
    "run_cli",
    "running_tool",
    "wait_busy",
    "wait_until",
)

REPO = Path(__file__).resolve().parent.parent

_COMPILERS = ("nvcc", "cicc", "ptxas", "fatbinary", "cudafe")
#: What the worker kernel calls NVRTC's processes (``ps`` shows these names): its
#: workers, and the template they are forked from.
NVRTC_WORKER, NVRTC_TEMPLATE = "acw-nvrtc", "acz-nvrtc"


def _ours(words: tuple[str, ...], names: tuple[str, ...] = ()) -> list[psutil.Process]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if child.name() in names or any(word in " ".join(child.cmdline()) for word in words):
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found


def compiler_processes() -> list[psutil.Process]:
    """Compiler processes (nvcc and its tools, NVRTC workers) below this test process.

    Other children, such as multiprocessing's resource tracker left by other tests, are
    not ours to judge."""
    return _ours(_COMPILERS, (NVRTC_WORKER, NVRTC_TEMPLATE))


def gone(pids: list[int]) -> bool:
    """Whether every process in ``pids`` has ended (asynccomp's own rule: a zombie not
    yet reaped has)."""
    return not any(running(each) for each in pids)


def nvrtc_workers() -> list[int]:
    """Process ids of the NVRTC worker processes below this test process."""
    return sorted(p.pid for p in _ours((), (NVRTC_WORKER,)))


async def wait_until(predicate: Callable[[], bool], within: float = 60.0) -> None:
    """Poll ``predicate`` until it holds (it looks at processes and counters, which
    signal nothing), failing after ``within`` seconds."""
    with anyio.fail_after(within):
        while not predicate():  # noqa: ASYNC110 - nothing to wait on but the predicate
            await anyio.sleep(0.01)


def running_tool(name: str) -> bool:
    """Whether a compiler process called ``name`` (``cicc``, ``ptxas``...) runs below
    this test process now."""
    found = False
    for process in compiler_processes():
        try:
            found = found or process.name() == name
        except psutil.NoSuchProcess:
            pass
    return found


def _cpu_seconds(process: psutil.Process) -> float:
    try:
        times = process.cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return float(times.user + times.system)


async def wait_busy(pids: list[int], cpu: float = 0.2, within: float = 60.0) -> int:
    """Which of the processes ``pids`` is the first to spend ``cpu`` more seconds of CPU
    from now: the NVRTC worker compiling a job (an idle one waits on its pipe, spending
    none; it acknowledges a job before compiling it)."""
    processes = [psutil.Process(pid) for pid in pids]
    before = {p.pid: _cpu_seconds(p) for p in processes}
    busy: list[int] = []

    def one_is_busy() -> bool:
        busy.extend(p.pid for p in processes if _cpu_seconds(p) - before[p.pid] >= cpu)
        return bool(busy)

    await wait_until(one_is_busy, within)
    return busy[0]


def bare_environ(**settings: str) -> dict[str, str]:
    """An environment of almost nothing (``settings``, a plain ``PATH``), in which a
    Python child still imports what this one does: this checkout and ``$PYTHONPATH``'s
    folders (where some machines install packages: ``pip --target``), and the user's
    own site-packages though ``settings`` moves ``HOME`` (``pip --user``)."""
    env = {"PATH": "/usr/bin:/bin", **settings}
    env["PYTHONPATH"] = python_path()  # of this process's $PYTHONPATH
    env["PYTHONUSERBASE"] = site.getuserbase()
    return env


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``python -m asynccomp ARGS`` in exactly ``env``, from the repository's folder."""
    return subprocess.run(
        [sys.executable, "-m", "asynccomp", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=120,
        check=False,
    )
