"""What a pool is made of: its tasks, workers and template, and how a process ended."""

from __future__ import annotations

import dataclasses
import enum
import math
import os
import signal
import socket
import subprocess
from concurrent.futures import Future
from pathlib import Path

from . import _frames
from ._settings import TaskResult

__all__ = ("REAP", "Task", "Template", "Worker", "WorkerState", "describe_exit", "wait_status")

# A worker (or template) that ends before it is ready this many times in a row means the
# initializers cannot run here: say so rather than start one forever.
START_ATTEMPTS = 3
# A task whose worker died before receiving it goes to another worker, this many times.
SEND_ATTEMPTS = 3
# How long a task sent to an idle worker may take to reach it (its RECEIVED comes at
# once from a live worker): one that does not answer (stopped idle) is killed, and the
# task goes to another.
RECEIVE_GRACE = 5.0
# How often busy and starting workers are looked at (stopped by a signal, memory).
WATCH = 1.0
# How long a worker whose pipe closed may take to be seen ended (its exit status tells
# how it died), and how long a killed spawned worker may take to be reaped.
STATUS_GRACE = 2.0
REAP = 10.0


class WorkerState(enum.Enum):
    STARTING = "starting"
    IDLE = "idle"
    BUSY = "busy"


@dataclasses.dataclass(eq=False)
class Task:
    """One call of ``fn(*args)``: its pickled form, limits, and the future of its result."""

    id: int
    payload: bytes
    timeout: float | None
    affinity: str | None
    future: Future[TaskResult] = dataclasses.field(default_factory=Future)
    attempts: int = 0
    sent: float = 0.0
    received: bool = False
    cancelled: bool = False


@dataclasses.dataclass(eq=False)
class Worker:
    tasks: int  # fd, non-blocking: tasks go here
    results: int  # fd, non-blocking: answers come here
    deadline: float  # STARTING: its start's; BUSY: its task's (inf: none)
    process: subprocess.Popen[bytes] | None  # spawned; None: forked by the template
    folder: Path | None
    request: int = 0  # forked: the fork request's number
    pid: int | None = None
    state: WorkerState = WorkerState.STARTING
    task: Task | None = None
    uses: int = 0
    tags: list[str] = dataclasses.field(default_factory=list)
    retire: bool = False
    parser: _frames.Parser = dataclasses.field(default_factory=_frames.Parser)
    outbox: bytearray = dataclasses.field(default_factory=bytearray)
    stopped_since: float | None = None
    ends_by: float = math.inf  # its pipe closed: seen ended by then


@dataclasses.dataclass(eq=False)
class Template:
    """The template a pool forks its workers from: one it started (``process``), or
    one another process of this user shares (``process`` is ``None``)."""

    control: socket.socket
    process: subprocess.Popen[bytes] | None
    deadline: float
    ready: bool = False
    #: Other processes may fork from it too: ending the pool does not end it.
    shared: bool = False


def describe_exit(status: int | None) -> str:
    """How a process ended, from its wait status (``None``: unknown)."""
    if status is None:
        return "ended (its exit status is unknown)"
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            return f"was killed by {signal.Signals(number).name}"
        except ValueError:
            return f"was killed by signal {number}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


def wait_status(process: subprocess.Popen[bytes]) -> int | None:
    code = process.poll()
    if code is None:
        return None
    return (-code) & 0x7F if code < 0 else (code & 0xFF) << 8
