"""The fault soak's client process (``python -m benchmarks.server.soak client ...``).

An ``Engine(server="auto")`` in an event loop of its own thread sends the client's jobs
in batches through ``as_completed`` and appends one JSON line per job to the client's
file: ``ok`` with the binary's SHA-256, or the error's class name and message. A job
that cannot be built (``InvalidJob``) is a line with ``"built": false``. A ``header``
job's line has ``"hdr": [before, after]``: the content hash of the run's header read
before its batch was sent and as its result came.

Forks (the soak's ``fork`` chaos): SIGUSR1 or SIGUSR2 asks for one. The engine's thread
stops at its next batch boundary (its engine open, connected, idle) and the main thread
forks. The child compiles one job of its own through an engine of its own
(``SyncEngine(server="auto")``), writes its line to a file of its own
(``client<N>.fork<K>.jsonl``), never the parent's, and exits: SIGUSR1 normally
(``sys.exit(0)``: ``atexit`` handlers and finalizers run on what it inherited),
SIGUSR2 with ``os._exit(0)``. The parent goes on at once; its main thread reaps the
child and notes in ``client<N>.forks.jsonl`` each fork (``pid``, ``mode``) and each end
(exit ``status``; ``hung`` when it was still running ``CHILD_LIMIT`` seconds after the
fork and was killed).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import anyio

from asynccomp import AsyncCompError, CompileResult, Engine, InvalidJob, SyncEngine

from .soak_mix import ARCH, Mix, Spec, fork_spec, job_spec, text_hash

#: Seconds a forked child may take (its own engine, one compile) before it is killed.
CHILD_LIMIT = 120.0
FORK_MODES = {signal.SIGUSR1: "exit", signal.SIGUSR2: "_exit"}


def record_of(result: CompileResult, i: int) -> dict[str, Any]:
    if result.ok:
        binary = result.binary or b""
        return {"id": i, "sha": hashlib.sha256(binary).hexdigest(), "cached": result.cached}
    error = result.error
    return {"id": i, "error": type(error).__name__, "msg": str(error)[:300]}


def _append(path: Path | int, record: dict[str, Any]) -> None:
    """One write per line: a kill cuts no line."""
    line = (json.dumps(record) + "\n").encode()
    if isinstance(path, int):
        os.write(path, line)
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


class Forks:
    """Forks asked for by a signal, made by the main thread at a batch boundary of the
    engine's thread, and their children reaped."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.asked: list[str] = []  # the modes asked for, not yet made
        self.at_boundary = threading.Event()  # the engine's thread waits for a fork
        self.forked = threading.Event()  # the main thread made it
        self.children: dict[int, tuple[int, float]] = {}  # pid -> (number, started)
        self.made = 0
        self.parent = os.getpid()

    @property
    def log(self) -> Path:
        return self.out.with_suffix(".forks.jsonl")

    def ask(self, number: int, frame: object) -> None:  # a signal handler (main thread)
        self.asked.append(FORK_MODES[signal.Signals(number)])

    def boundary(self) -> None:
        """In the engine's thread, between batches: wait while a fork asked for is made."""
        if self.asked:
            self.forked.clear()
            self.at_boundary.set()
            self.forked.wait(60)

    def fork(self) -> None:
        """In the main thread, the engine's thread waiting at a boundary."""
        mode = self.asked.pop(0)
        number, self.made = self.made, self.made + 1
        value = self.parent * 1000 + number  # the child's own source
        pid = os.fork()
        if pid == 0:
            self._child(number, mode, value)  # never returns
        self.children[pid] = (number, time.monotonic())
        _append(self.log, {"fork": number, "pid": pid, "mode": mode, "value": value})

    def _child(self, number: int, mode: str, value: int) -> None:
        code = 0
        spec = fork_spec(value)
        record: dict[str, Any] = {"fork": number, "pid": os.getpid(), "mode": mode, "value": value}
        try:
            with SyncEngine(arch=ARCH, server="auto") as engine:
                record |= record_of(engine.compile(spec.job()), -1)
        except BaseException as exc:
            typed = isinstance(exc, AsyncCompError)
            record |= {"error": type(exc).__name__ if typed else f"untyped:{type(exc).__name__}"}
            record["msg"] = str(exc)[:300]
            code = 1
        _append(self.out.with_suffix(f".fork{number}.jsonl"), record)
        if mode == "_exit":
            os._exit(code)
        sys.exit(code)  # a normal exit: atexit handlers, finalizers

    def reap(self, last: bool = False) -> None:
        """Note the children that ended; kill one past CHILD_LIMIT. ``last``: wait for
        every child (up to its limit)."""
        while self.children:
            for pid, (number, started) in list(self.children.items()):
                hung = time.monotonic() - started > CHILD_LIMIT
                if hung:
                    os.kill(pid, signal.SIGKILL)
                try:
                    done, status = os.waitpid(pid, 0 if hung else os.WNOHANG)
                    code: int | None = os.waitstatus_to_exitcode(status)
                except ChildProcessError:  # reaped by someone else: its status is lost
                    done, code = pid, None
                if done:
                    del self.children[pid]
                    ended: dict[str, Any] = {"fork": number, "status": code}
                    ended["seconds"] = round(time.monotonic() - started, 2)
                    _append(self.log, ended | ({"hung": True} if hung else {}))
            if not last:
                return
            time.sleep(0.1)


async def _batches(ids: list[int], mix: Mix, out: Path, batch: int, forks: Forks) -> None:
    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    header = Path(mix.header_path)

    def header_now() -> str:
        return text_hash(header.read_bytes())

    async with Engine(arch=ARCH, server="auto") as engine:
        for start in range(0, len(ids), batch):
            forks.boundary()
            specs: dict[int, Spec] = {}
            jobs = []
            for i in ids[start : start + batch]:
                spec = job_spec(i, mix)
                try:
                    jobs.append(spec.job())
                    specs[i] = spec
                except InvalidJob as exc:
                    _append(
                        fd, {"id": i, "error": "InvalidJob", "msg": str(exc)[:300], "built": False}
                    )
            before = header_now() if any(s.kind == "header" for s in specs.values()) else None
            pending = set(specs)
            try:
                async with engine.as_completed(jobs) as results:
                    async for result in results:
                        i = int(result.job.name[1:])
                        record = record_of(result, i)
                        if specs[i].kind == "header":
                            record["hdr"] = [before, header_now()]
                        pending.discard(i)
                        _append(fd, record)
            except Exception as exc:  # the whole call failed: its jobs say so
                typed = isinstance(exc, AsyncCompError)
                name = type(exc).__name__ if typed else f"untyped:{type(exc).__name__}"
                for i in sorted(pending):
                    _append(fd, {"id": i, "error": name, "msg": str(exc)[:300], "call": True})
    os.close(fd)


def run(ids_file: Path, out: Path, mix: Mix, batch: int) -> int:
    """The client's main thread: the engine's thread started, forks made and reaped."""
    forks = Forks(out)
    for number in FORK_MODES:
        signal.signal(number, forks.ask)
    out.with_suffix(".ready").touch()  # the driver signals only a client that can take it
    ids = json.loads(ids_file.read_text())
    failed: list[str] = []

    def engine_thread() -> None:
        try:
            anyio.run(_batches, ids, mix, out, batch, forks)
        except BaseException:
            failed.append(traceback.format_exc())

    thread = threading.Thread(target=engine_thread, name="engine")
    thread.start()
    while thread.is_alive():
        if forks.at_boundary.wait(0.2):
            forks.at_boundary.clear()
            forks.fork()  # a child never comes back from here
            forks.forked.set()
        forks.reap()
    thread.join()
    forks.reap(last=True)
    for trace in failed:
        print(trace, file=sys.stderr, flush=True)
    return 1 if failed else 0
