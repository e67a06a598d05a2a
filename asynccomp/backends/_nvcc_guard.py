"""nvcc's guard: ``python -I -S _nvcc_guard.py ENGINE_PID REPORT_FD NVCC [ARG ...]``.

:class:`~asynccomp.backends.NvccBackend` starts this script, not nvcc, as the leader of
a new session; it runs nvcc as its child in that session's process group (cicc, ptxas,
fatbinary... join it below nvcc) and waits. If the engine's process ends first (killed
by SIGKILL or SIGTERM, crashed: however it ends) the guard kills the whole group, so
no compiler outlives its engine: orphaned, they ran on for 12-41 s and left their work
folder behind (issue 20).

Why a process of its own, rather than ``prctl(PR_SET_PDEATHSIG)`` on nvcc:

- the parent-death setting is cleared in a child: it would reach nvcc, never the cicc
  and ptxas nvcc runs, which do the long work;
- it fires when the *thread* that started the process ends, not the process: anyio's
  trio backend starts processes from a worker thread that ends after a while idle;
- set between fork and exec (``preexec_fn``), it would run Python in the child of a
  process with threads (event loop, NVRTC, Ray), which is not async-signal-safe.

The guard watches the engine with the watch every asynccomp process uses
(:class:`asynccomp.workers._watch.Watch`, loaded by path: a pidfd, readable once the
engine's process has ended, whichever thread started the guard). It runs by path with
``-I -S`` and imports only the interpreter's own modules: about 12 ms before nvcc
starts, against nvcc's second or more.

It exits with nvcc's status, or re-raises the signal that killed nvcc, so the engine
sees the return code it would have seen running nvcc itself. If nvcc cannot be started
(``EACCES``, ``ENOENT``, ``EAGAIN``...), the errno goes to ``REPORT_FD`` as digits and
the status is 127 (:data:`NOT_STARTED`, the one name the package imports from here).
"""

from __future__ import annotations

import importlib.util
import os
import select
import signal
import sys
import time
from pathlib import Path
from types import ModuleType

#: The exit status that means "nvcc could not be started" (the errno is on REPORT_FD).
NOT_STARTED = 127

# How often the engine is looked for where pidfds are missing (Linux before 5.3).
_POLL = 0.1


def _watch_module() -> ModuleType:
    """asynccomp.workers._watch, by path (standard library only: no package import)."""
    path = Path(__file__).resolve().parent.parent / "workers" / "_watch.py"
    spec = importlib.util.spec_from_file_location("_asynccomp_watch", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _kill_group(*_: object) -> None:
    # This process leads the group: nvcc and every tool below it die, and so does it.
    os.killpg(0, signal.SIGKILL)


def _engine_watch(engine: int) -> int | None:
    """A pidfd of the engine's process, ``None`` where pidfds are missing. Exits at
    once if the engine is already gone (then the pid may name another process)."""
    watch = _watch_module().Watch(engine)
    if watch.ended() or os.getppid() != engine:  # nothing to run for
        os._exit(1)
    fd: int | None = watch.fileno()
    return fd


def _wait(child: int, engine: int, watch: int | None) -> int:
    """nvcc's wait status, once it ends; the group killed if the engine ends first."""
    if watch is not None:
        try:
            ended = os.pidfd_open(child)  # our own child, not reaped: the pid is its
        except OSError:
            ended = None
        if ended is not None:
            poller = select.poll()
            poller.register(watch, select.POLLIN)
            poller.register(ended, select.POLLIN)
            while True:
                ready = {fd for fd, _ in poller.poll()}
                if watch in ready:
                    _kill_group()
                if ended in ready:
                    return os.waitpid(child, 0)[1]
    while True:
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid == child:
            return status
        if os.getppid() != engine:  # reparented: the engine's process has ended
            _kill_group()
        time.sleep(_POLL)


def _exit_like(status: int) -> int:
    """Exit as nvcc did: its status, or killed by its signal."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            import resource  # no core file of the guard's for nvcc's crash

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            signal.signal(number, signal.SIG_DFL)
        except (ImportError, OSError, ValueError):
            pass
        os.kill(os.getpid(), number)
        return 128 + number  # a signal that does not kill by default
    return os.waitstatus_to_exitcode(status)


def main(argv: list[str]) -> int:
    engine, report, command = int(argv[1]), int(argv[2]), argv[3:]
    os.set_inheritable(report, False)  # nvcc must not hold it open
    # A SIGTERM or SIGHUP for the guard is one for the compile: nvcc would not get it.
    signal.signal(signal.SIGTERM, _kill_group)
    signal.signal(signal.SIGHUP, _kill_group)
    watch = _engine_watch(engine)
    try:
        # Signals Python ignores for itself, back to their defaults for nvcc (as
        # subprocess' restore_signals does).
        child = os.posix_spawnp(
            command[0], command, os.environ, setsigdef=(signal.SIGPIPE, signal.SIGXFSZ)
        )
    except OSError as exc:
        os.write(report, str(exc.errno or 0).encode())
        return NOT_STARTED
    return _exit_like(_wait(child, engine, watch))


if __name__ == "__main__":
    sys.exit(main(sys.argv))
