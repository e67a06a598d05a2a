"""Tasks and initializers for worker pools (asynccomp.workers), importable by name (the
main venv has no cloudpickle: they travel by pickle), and the helpers the worker tests
share."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import psutil

from .processes import gone

T = TypeVar("T")

_kept: list[bytes] = []


def pid() -> int:
    return os.getpid()


def hold(mib: int) -> int:
    """Allocate ``mib`` MiB, touched (resident), and keep them in the worker."""
    _kept.append(b"\1" * (mib << 20))
    return os.getpid()


_remembered: tuple[str, int] = ("", 0)


def remember(tag: str) -> None:
    """An initializer: what it was given, and the process it ran in."""
    global _remembered
    _remembered = (tag, os.getpid())


def remembered() -> tuple[str, int, int]:
    """The initializer's tag and process, and this worker's."""
    return (*_remembered, os.getpid())


def environ_of(name: str) -> str | None:
    return os.environ.get(name)


def shout(text: str) -> None:
    """Write ``text`` to the worker's standard error."""
    import sys

    print(text, file=sys.stderr, flush=True)


def size(data: bytes) -> int:
    return len(data)


def a_lock() -> object:
    """A value that does not pickle."""
    return threading.Lock()


class Unpicklable(Exception):
    """An exception that does not pickle: it holds a lock."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.lock = threading.Lock()


def raise_unpicklable() -> None:
    raise Unpicklable("held a lock")


def raise_value_error() -> None:
    raise ValueError("a task's own error")


def exit_task(code: int) -> None:
    raise SystemExit(code)


def die(code: int) -> None:
    os._exit(code)


def stop_on_cancel(gate: str) -> str:
    """A task that runs until its pool cancels it (it watches cancel_event), then says
    so; it first writes its pid to ``gate/claimed``."""
    from asynccomp.workers import cancel_event

    _claim(Path(gate))
    cancelled = cancel_event()
    while not cancelled.wait(0.05):
        pass
    return "stopped"


def threads_alive() -> int:
    return threading.active_count()


def import_numpy() -> None:
    """An initializer whose import starts a thread pool unless told not to (OpenBLAS)."""
    import numpy  # noqa: F401


def start_a_thread() -> None:
    """An initializer that leaves a thread running (forking from it is unsafe)."""
    threading.Thread(target=threading.Event().wait, daemon=True).start()


def import_torch_cuda() -> None:
    """An initializer: ``torch.cuda`` imported and its ``is_available()`` asked, as
    TileLang's import asks it."""
    import torch.cuda

    torch.cuda.is_available()


def torch_cuda_usable() -> tuple[bool, bool, bool]:
    """Whether CUDA was initialized here before this task, is available, and then runs a
    tensor op (a forked worker initializes CUDA for itself)."""
    import torch

    before = torch.cuda.is_initialized()
    available = torch.cuda.is_available()
    ran = bool((torch.ones(4, device="cuda") * 2).sum().item() == 8) if available else False
    return before, available, ran


def hold_then_wait(mib: int, gate: str) -> int:
    """Allocate ``mib`` MiB, touched, then wait for ``gate/open``."""
    kept = b"\1" * (mib << 20)
    _wait_open(Path(gate))
    return len(kept)


def _claim(gate: Path) -> bool:
    """Whether this process is the first to get here (it creates ``gate/claimed``, its pid
    in it)."""
    try:
        fd = os.open(gate / "claimed", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    return True


def _wait_open(gate: Path) -> None:
    while not (gate / "open").exists():
        time.sleep(0.05)


def wait_open(gate: str) -> bool:
    """A task that ends once ``gate/open`` exists (its test opens it, or its fixture)."""
    _wait_open(Path(gate))
    return True


def call(fn: Callable[..., object], *args: object) -> object:
    return fn(*args)


def asynccomp_file() -> str:
    import asynccomp

    return str(asynccomp.__file__)


def start_never_ready(gate: str) -> None:
    """An initializer that hangs until ``gate/open`` exists, once it has added its
    worker's pid to ``gate/started``."""
    with open(Path(gate) / "started", "a") as started:
        started.write(f"{os.getpid()}\n")
    _wait_open(Path(gate))


def first_start_hangs(gate: str) -> None:
    """An initializer that hangs (until ``gate/open`` exists) in the first worker only."""
    if _claim(Path(gate)):
        _wait_open(Path(gate))


def first_task_hangs(gate: str) -> int:
    """A task that hangs (until ``gate/open`` exists) in the first worker to claim it."""
    if _claim(Path(gate)):
        _wait_open(Path(gate))
    return os.getpid()


def lowering_hangs(gate: str, _path: object) -> int:
    """A stand-in for TileLang's lowering task (its recipe and the parent's import
    path): every one hangs until ``gate/open`` exists; the first writes ``gate/claimed``."""
    _claim(Path(gate))
    _wait_open(Path(gate))
    return os.getpid()


def claimed(gate: Path, within: float) -> int:
    """The pid in ``gate/claimed``, once it is there."""
    deadline = time.monotonic() + within
    while not (gate / "claimed").exists() or not (gate / "claimed").read_text():
        assert time.monotonic() < deadline, "nothing claimed the gate"
        time.sleep(0.05)
    return int((gate / "claimed").read_text())


def wait_gone(pids: list[int], within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not gone(pids):
        assert time.monotonic() < deadline, f"{_described(pids)} outlived their pool"
        time.sleep(0.05)


def _described(pids: list[int]) -> list[str]:
    """Each process of ``pids`` still there: its pid, name, parent and command line."""
    said = []
    for each in pids:
        try:
            process = psutil.Process(each)
            said.append(f"{each} {process.name()} (parent {process.ppid()}): {process.cmdline()}")
        except psutil.Error:
            continue
    return said


def within(seconds: float, call: Callable[[], T], what: str) -> T:
    """``call()`` in a thread, failing the test if it has not returned after ``seconds``
    (then the test's cleanup must unblock it: it is not killed)."""
    out: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            out.append(call())
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{what} still waits after {seconds} s"
    if errors:
        raise errors[0]
    return out[0]
