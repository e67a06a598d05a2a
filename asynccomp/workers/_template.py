"""A warm template: ``python -m asynccomp.workers._template CONTROL_FD OWNER NAME``.

It runs a pool's initializers once (TVM and its tensor intrinsics, TileLang, NVRTC loaded
and run once), then forks a worker for each request: the worker starts with all of that
in memory (shared, copy-on-write) instead of paying for it again, the way Inductor's
warm pool and Android's zygote do it. A fork is safe only from a process of one thread,
so the template says whether it is (``forkable``) after its initializers; the pool
spawns fresh interpreters instead where it is not.

Messages are pickled tuples on a ``SOCK_SEQPACKET`` socket (one message each):

- pool -> template: ``("init", initializers)`` first; then ``("fork", request)`` with the
  worker's two pipe ends attached (``SCM_RIGHTS``).
- template -> pool: ``("ready", pid, forkable)`` or ``("init_error", traceback)``;
  ``("forked", request, pid)`` (``pid`` < 0: ``-errno``, no fork); ``("exit", pid,
  status)`` as it reaps a worker (so the pool can say how a worker ended).

It ends when the pool's end of the socket closes (the pool's process ended too: the
kernel closes it), killing nothing: each worker watches the pool's process itself.
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import sys
import threading
import traceback
from pathlib import Path

from . import _child

__all__ = ("main",)

_MAX = 1 << 20  # a message's largest size


def _send(control: socket.socket, *message: object) -> None:
    control.send(pickle.dumps(message))


def _single_threaded() -> bool:
    try:
        tasks = sum(1 for _ in Path("/proc/self/task").iterdir())
    except OSError:
        tasks = 1
    return threading.active_count() == 1 and tasks == 1


def _reaper(control: socket.socket) -> None:
    def reap(*_: object) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            try:
                _send(control, "exit", pid, status)
            except OSError:
                return

    signal.signal(signal.SIGCHLD, reap)


def _fork(control: socket.socket, fds: list[int], owner: int, name: str) -> int:
    template = os.getpid()  # (the child's getppid() could already name a reaper)
    pid = os.fork()
    if pid:
        return pid
    status = 1
    try:  # the worker: nothing of the template's but what it imported
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        control.close()
        os.setsid()
        status = _child.serve(fds[0], fds[1], owner, name, template)
    finally:
        os._exit(status)


def main(control_fd: int, owner: int, name: str) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _child.name_process(f"acz-{name}")
    control = socket.socket(fileno=control_fd)
    message = control.recv(_MAX)
    if not message:
        return 0
    try:
        for initializer in pickle.loads(message)[1]:
            initializer()
    except BaseException:
        _send(control, "init_error", traceback.format_exc())
        return 1
    forkable = _single_threaded()
    _send(control, "ready", os.getpid(), forkable)
    if not forkable:
        return 0
    _reaper(control)
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(control, _MAX, 2)
        except OSError:
            return 0
        if not data:
            return 0  # the pool's end closed: its process ended, or it closed the pool
        _, request = pickle.loads(data)
        try:
            pid = _fork(control, fds, owner, name)
        except OSError as exc:
            pid = -(exc.errno or 1)
        for fd in fds:
            os.close(fd)
        _send(control, "forked", request, pid)


if __name__ == "__main__":
    control_arg, owner_arg, name_arg = sys.argv[1:4]
    sys.exit(main(int(control_arg), int(owner_arg), name_arg))
