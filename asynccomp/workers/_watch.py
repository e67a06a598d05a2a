"""The one watch of another process's end, for every process asynccomp starts to die with
the process that owns it: worker and template processes (a thread of theirs), and nvcc's
guard (:mod:`asynccomp.backends._nvcc_guard`, which loads this file by path: standard
library only).

It waits on a pidfd of the owner, which becomes readable once the owner (every thread of
it) has ended, whichever thread started the watcher and whoever is the watcher's parent:
``PR_SET_PDEATHSIG`` fires when the *thread* that spawned a process ends (anyio's trio
backend spawns from a cached thread that idles out after 10 s), and a worker forked from
a template is the template's child, not the owner's. Where pidfds are missing (Linux
before 5.3) it looks every :data:`POLL` seconds.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time

__all__ = ("POLL", "Watch", "die_with")

#: How often an owner is looked for where pidfds are missing.
POLL = 0.1


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie has ended: its parent has not reaped it yet
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[:1] not in ([b"Z"], [b"X"])
    except OSError:
        return True


class Watch:
    """The end of process ``pid``: :meth:`fileno` is readable once it has ended (``None``
    where pidfds are missing: poll :meth:`ended`)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        try:
            self._fd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self._fd = None

    def fileno(self) -> int | None:
        return self._fd

    def ended(self) -> bool:
        if self._fd is not None:
            return bool(select.select([self._fd], [], [], 0)[0])
        return not _exists(self.pid)

    def wait(self) -> None:
        """Blocking: until the process has ended."""
        if self._fd is not None:
            select.select([self._fd], [], [])
            return
        while _exists(self.pid):
            time.sleep(POLL)


def _kill_group() -> None:
    os.killpg(0, signal.SIGKILL)  # this process leads its group: all of it, itself too


def die_with(owner: int) -> Watch:
    """Kill this process's whole group (it leads one) once process ``owner`` ends: a
    daemon thread waits for it. Taken before anything else runs; an owner already gone
    (its pid may name another process by now) ends this one at once."""
    watch = Watch(owner)
    if watch.ended():
        _kill_group()

    def wait_then_kill() -> None:
        watch.wait()
        _kill_group()

    threading.Thread(target=wait_then_kill, name="asynccomp-owner-watch", daemon=True).start()
    return watch
