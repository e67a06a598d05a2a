"""A warm template: ``python -m asynccomp.workers._template CONTROL_FD OWNER NAME [SHARE IDLE]``.

It runs a pool's initializers once (TVM and its tensor intrinsics, TileLang, NVRTC loaded
and run once), then forks a worker for each request: the worker starts with all of that
in memory (shared, copy-on-write) instead of paying for it again, the way Inductor's
warm pool and Android's zygote do it. A fork is safe only from a process of one thread,
so the template says whether it is (``forkable``) after its initializers; the pool
spawns fresh interpreters instead where it is not.

Messages are pickled tuples on a ``SOCK_SEQPACKET`` socket (one message each):

- pool -> template: ``("init", initializers)`` first (on the socket it was started
  with); then ``("fork", request)`` with the worker's two pipe ends attached
  (``SCM_RIGHTS``), and the pool's standard output and error where it has them (the
  worker writes there, not to the template's); ``("stop",)`` ends a template.
- template -> pool: ``("ready", pid, forkable, threads, culprit)`` (``threads``: the
  names of its threads where it is not forkable; ``culprit``: the first initializer
  after which it had more than one) or ``("init_error", traceback)``;
  ``("forked", request, pid)`` (``pid`` < 0: ``-errno``, no fork); ``("exit", pid,
  status)`` as it reaps a worker that pool asked for (so the pool can say how it ended).

Each worker dies with the pool's process that asked for it (its owner), not with the
template. Unshared, the template ends when its pool's end of the socket closes (the
pool's process ended too: the kernel closes it). Shared (``SHARE``: a socket path in a
private folder), it also listens there, and any process of the same user connects and
is greeted ``("ready", pid, True, [])``: a later tuning process forks its workers at once,
from imports paid once per machine. Only one template listens per path (it holds
``SHARE.lock`` while it lives); it ends ``IDLE`` seconds after its last pool left, or
on ``("stop",)``. Once shared, it writes its own output to ``SHARE.log`` (and reads
nothing), so it does not hold its first pool's terminal or pipes open after that pool's
process ended.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
import selectors
import signal
import socket
import sys
import threading
import time
import traceback
from pathlib import Path

from .. import _os
from . import _child
from ._torch_devices import answer_device_count

__all__ = ("main",)

_MAX = 1 << 20  # a message's largest size


def _send(control: socket.socket, *message: object) -> None:
    control.send(pickle.dumps(message))


def _describe(initializer: object) -> str:
    """An initializer's name for a warning: ``module.function`` (a partial's function)."""
    function = getattr(initializer, "func", initializer)
    module = getattr(function, "__module__", None)
    name = getattr(function, "__qualname__", None) or repr(function)
    return f"{module}.{name}" if module else name


def _one_thread(threads: list[str]) -> bool:
    """Whether this process, whose kernel threads are ``threads``, is one thread: the
    only state a fork is safe from."""
    return threading.active_count() == 1 and len(threads) == 1


def _threads() -> list[str]:
    """This process's threads, by name (the kernel's, which native threads have too)."""
    try:
        tasks = sorted(Path("/proc/self/task").iterdir(), key=lambda t: int(t.name))
    except OSError:
        return [t.name for t in threading.enumerate()]
    names = []
    for task in tasks:
        try:
            names.append((task / "comm").read_text().strip())
        except OSError:  # it ended meanwhile
            pass
    return names


class _Forks:
    """The template's life after its initializers: fork requests from its pools."""

    def __init__(self, first: socket.socket, owner: int, name: str) -> None:
        self.name = name
        self.selector = selectors.DefaultSelector()
        self.owners: dict[socket.socket, int] = {}  # each pool's socket: its process
        self.asked: dict[int, socket.socket] = {}  # each live worker: whose it is
        self.listener: socket.socket | None = None
        self.lock = -1
        self.idle = 0.0
        self.left_at = time.monotonic()
        self._join(first, owner)
        signal.signal(signal.SIGCHLD, self._reap)

    def _join(self, pool: socket.socket, owner: int) -> None:
        self.owners[pool] = owner
        self.selector.register(pool, selectors.EVENT_READ)

    def _leave(self, pool: socket.socket) -> None:
        self.owners.pop(pool, None)
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(pool)
        pool.close()
        self.left_at = time.monotonic()

    def share(self, path: Path, idle: float) -> None:
        """Listen at ``path`` too, unless another template already does."""
        lock = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # another template of these settings serves this user: only ours
            os.close(lock)
            return
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a socket left by a template that was killed
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        old = os.umask(0o177)
        try:
            listener.bind(str(path))
        finally:
            os.umask(old)
        listener.listen(64)
        # Nothing of the first pool's terminal or pipes held past that pool's process.
        log = os.open(f"{path}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        nothing = os.open(os.devnull, os.O_RDONLY)
        for source, fd in ((nothing, 0), (log, 1), (log, 2)):
            os.dup2(source, fd)
        os.close(log)
        os.close(nothing)
        self.lock, self.listener, self.idle = lock, listener, idle
        self.selector.register(listener, selectors.EVENT_READ)

    def serve(self) -> int:
        try:
            while self.owners or self.listener is not None:
                timeout = None
                if not self.owners:  # shared, nobody here: wait at most the idle time
                    timeout = self.left_at + self.idle - time.monotonic()
                    if timeout <= 0:
                        return 0
                for key, _ in self.selector.select(timeout):
                    if key.fileobj is self.listener:
                        self._accept()
                    elif not self._request(key.fileobj):  # type: ignore[arg-type]
                        return 0
            return 0
        finally:
            if self.listener is not None:  # ours while we hold the lock: nobody's next
                with contextlib.suppress(OSError):
                    Path(self.listener.getsockname()).unlink()

    def _accept(self) -> None:
        assert self.listener is not None
        try:
            pool, _ = self.listener.accept()
        except OSError:
            return
        said = _os.peer(pool)
        if said is None or said[1] != os.getuid():  # the folder is private: a second lock
            pool.close()
            return
        pid = said[0]
        pool.setblocking(True)
        try:
            _send(pool, "ready", os.getpid(), True, [])
        except OSError:
            pool.close()
            return
        self._join(pool, pid)

    def _request(self, pool: socket.socket) -> bool:
        """Serve one message of ``pool``; ``False`` when told to stop."""
        try:
            data, fds, _, _ = socket.recv_fds(pool, _MAX, 4)
        except OSError:
            data, fds = b"", []
        if not data:
            for fd in fds:
                os.close(fd)
            self._leave(pool)  # that pool closed, or its process ended
            return True
        message = pickle.loads(data)
        if message[0] == "stop":
            return False
        # SIGCHLD waits until the worker is known as ``pool``'s: one that ended at once
        # is still reported to it.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        try:
            try:
                pid = self._fork(fds, self.owners[pool])
            except OSError as exc:
                pid = -(exc.errno or 1)
            if pid > 0:
                self.asked[pid] = pool
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        for fd in fds:
            os.close(fd)
        with contextlib.suppress(OSError):  # it ended meanwhile: its end of file tells
            _send(pool, "forked", message[1], pid)
        return True

    def _fork(self, fds: list[int], owner: int) -> int:
        template = os.getpid()  # (the child's getppid() could already name a reaper)
        pid = os.fork()
        if pid:
            return pid
        status = 1
        try:  # the worker: nothing of the template's but what it imported
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
            self.selector.close()
            for pool in self.owners:
                pool.close()
            if self.listener is not None:
                self.listener.close()
                os.close(self.lock)
            if len(fds) == 4:  # its pool's output, not the template's
                os.dup2(fds[2], 1)
                os.dup2(fds[3], 2)
            os.setsid()
            status = _child.serve(fds[0], fds[1], owner, self.name, template)
        finally:
            os._exit(status)

    def _reap(self, *_: object) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            pool = self.asked.pop(pid, None)
            if pool is not None and pool in self.owners:
                with contextlib.suppress(OSError):
                    _send(pool, "exit", pid, status)


def main(control_fd: int, owner: int, name: str, share: str = "", idle: float = 0.0) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _child.name_process(f"acz-{name}")
    control = socket.socket(fileno=control_fd)
    message = control.recv(_MAX)
    if not message:
        return 0
    culprit = ""  # the first initializer after which this process had other threads
    try:
        # torch's count of devices answered here: asking NVML starts CUDA's threads.
        with answer_device_count():
            initializers = pickle.loads(message)[1]  # (unpickling imports their modules)
            if not _one_thread(_threads()):
                culprit = "their unpickling or the interpreter's start (sitecustomize)"
            for initializer in initializers:
                initializer()
                if not culprit and not _one_thread(_threads()):
                    culprit = _describe(initializer)
    except BaseException:
        _send(control, "init_error", traceback.format_exc())
        return 1
    threads = _threads()
    forkable = _one_thread(threads)
    _send(control, "ready", os.getpid(), forkable, [] if forkable else threads, culprit)
    if not forkable:
        return 0
    forks = _Forks(control, owner, name)
    if share:
        try:
            forks.share(Path(share), idle)
        except OSError as exc:  # its first pool still has it
            print(f"asynccomp: the {name} template is not shared: {exc}", file=sys.stderr)
    return forks.serve()


if __name__ == "__main__":
    control_arg, owner_arg, name_arg, *shared = sys.argv[1:6]
    share_arg, idle_arg = (shared[0], float(shared[1])) if shared else ("", 0.0)
    sys.exit(main(int(control_arg), int(owner_arg), name_arg, share_arg, idle_arg))
