"""The process-wide engine behind :mod:`asynccomp.tvm`.

TVM calls its compile callback synchronously, from whatever thread builds, often many
at once. Each call here is one blocking-portal call into a :class:`~asynccomp.SyncEngine`
(an event loop in a daemon thread), so every caller shares one set of NVRTC workers,
nvcc slots, the in-flight dedupe and the cache.

- On this user's compile server (:mod:`asynccomp.server`) by default, started if none
  runs: any number of processes calling the callback (MetaSchedule's builder workers, a
  fresh set for every batch) share one set of warm NVRTC workers, one cache and one
  coalescing of identical compiles. ``ASYNCCOMP_SERVER=off`` compiles in this process
  instead (an engine of its own, one worker per CPU); ``ASYNCCOMP_SERVER=<socket>``
  names a server. A server that cannot be had is a warning, and this process compiles
  with one worker of its own (never a full pool per process).
- A ``$ASYNCCOMP_REMOTE_CACHE`` that cannot be used (a bad URL, no key, a refused key
  file) never fails a build and never stops the server: one ``RemoteCacheWarning``, and
  the facade compiles with the local tiers alone, on the server as usual (a server it
  starts is started without the remote setting: ``Engine(server=..., remote_cache=False)``)
  or in this process.
- Started lazily, on the first compile, under a lock (many threads may race to it), or
  sooner by :func:`start_in_background` (``asynccomp.tilelang.register()``), on a thread
  of its own that :func:`shutdown` waits for, so that a first compile finds it started.
- One engine whatever the settings: the TVM preamble fast path
  (``$ASYNCCOMP_TVM_FAST_PATH``) and the dump folder (``$TVM_KERNEL_DUMP``) are read at
  every call and travel with each job (``CompileJob.tvm_fast_path``, ``.dump``), so
  changing them mid-process takes effect at the next compile without starting a second
  set of NVRTC workers. The cache folder is read when the engine starts.
- Closed at interpreter exit (``atexit``): the portal thread is a daemon and is still
  alive when ``atexit`` handlers run, so the engine shuts down cleanly and its NVRTC
  worker processes are stopped.
- After ``os.fork()`` the child forgets the parent's engine without touching it (its
  event-loop thread does not exist in the child) and starts its own on first use. The
  forgotten object is kept referenced so that no finalizer of its ever runs there.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from pathlib import Path

from .._warn import warn
from ..cache import REMOTE_CACHE_ENV, remote_cache_from_environment
from ..config import CacheSettings, InProcess, OnServer, WorkerSettings, parse_server
from ..errors import AsyncCompWarning, EngineClosed, InvalidJob, ServerError
from ..job import CompileJob
from ..result import CompileResult
from ..sync import SyncEngine

__all__ = (
    "FAST_PATH_ENV",
    "SERVER_ENV",
    "compile_job",
    "engine",
    "engine_unless_shut",
    "fast_path_from_environment",
    "generation",
    "server_from_environment",
    "shutdown",
    "start_in_background",
    "where",
)

logger = logging.getLogger("asynccomp.tvm")

#: ``0``/``false``/``no``/``off`` compiles TVM sources as given (byte-identical to TVM);
#: unset or ``1``/``true``/``yes``/``on`` uses the preamble fast path (identical SASS).
FAST_PATH_ENV = "ASYNCCOMP_TVM_FAST_PATH"

#: ``auto`` (the default, as unset or empty): the user's compile server, started if
#: needed; ``off``: an engine in this process; anything else: the socket of a running
#: server. Read by :func:`~asynccomp.config.parse_server`, as ``Engine(server=...)`` is.
SERVER_ENV = "ASYNCCOMP_SERVER"

_ON = ("", "1", "true", "yes", "on")
_OFF = ("0", "false", "no", "off")


def server_from_environment() -> str | None:
    """``$ASYNCCOMP_SERVER`` as ``Engine(server=...)`` takes it (``None``: in-process)."""
    return parse_server(os.environ.get(SERVER_ENV, "").strip() or "auto")


def fast_path_from_environment() -> bool:
    """``$ASYNCCOMP_TVM_FAST_PATH`` as a bool (on when unset); a bad value is a ValueError."""
    value = os.environ.get(FAST_PATH_ENV, "").strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise ValueError(f"{FAST_PATH_ENV}={value!r}: expected 1 (on, the default) or 0 (off)")


class _Runtime:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.engine: SyncEngine | None = None
        self.starter: threading.Thread | None = None  # start_in_background()'s
        self.generation = 0  # shutdown() counts: a start asked for before one is void
        self.where = "not started"


_runtime = _Runtime()
# What a forked child inherited from its parent: never used, never finalized.
_inherited: list[_Runtime] = []


def engine() -> SyncEngine:
    """The running facade engine, started now if there is none."""
    runtime = _runtime
    running = runtime.engine
    if running is not None:
        return running
    with runtime.lock:
        return _engine_locked(runtime)


def generation() -> int:
    """How many times :func:`shutdown` has run: a caller that keeps it can tell whether
    one came since (:func:`engine_unless_shut`)."""
    return _runtime.generation


def engine_unless_shut(since: int) -> SyncEngine | None:
    """The running facade engine, started now if there is none, unless :func:`shutdown`
    came since :func:`generation` said ``since`` (``None``: a background task from
    before it starts no engine after it, at interpreter exit least of all)."""
    runtime = _runtime
    with runtime.lock:
        if runtime.generation != since:
            return None
        return _engine_locked(runtime)


def _engine_locked(runtime: _Runtime) -> SyncEngine:
    if runtime.engine is None:
        # Jobs carry the fast path and dump root; the engine's own defaults stay.
        server = server_from_environment()
        runtime.engine = _start(server)
        runtime.where = _where(runtime.engine, server)
        # Said once per process: which server (each toolkit and server folder has its
        # own, started on first use) or that it compiles in this process.
        logger.info("asynccomp.tvm: compiling %s", runtime.where)
    return runtime.engine


def start_in_background() -> None:
    """Start the facade engine now on a thread of its own and return at once, so that
    the first compile finds it started (on the compile server: the server too) instead
    of starting it. Nothing happens if it runs or is starting. A start that fails is
    logged, and the first compile meets the failure again and reports it;
    :func:`shutdown` waits for the thread."""
    runtime = _runtime
    with runtime.lock:
        if runtime.engine is not None or runtime.starter is not None:
            return
        runtime.starter = threading.Thread(
            target=_start_soon,
            args=(runtime, runtime.generation),
            name="asynccomp-engine-start",
            daemon=True,  # an interpreter that exits mid-start: atexit's shutdown() waits
        )
        runtime.starter.start()


def _start_soon(runtime: _Runtime, generation: int) -> None:
    try:
        with runtime.lock:
            if runtime is not _runtime or runtime.generation != generation:
                return  # shutdown() (or a fork) came first: start nothing
            _engine_locked(runtime)
    except Exception as exc:  # the first compile starts it again, and raises this
        logger.warning("asynccomp: the engine did not start in the background: %s", exc)
    finally:
        with runtime.lock:
            if runtime.starter is threading.current_thread():
                runtime.starter = None


def where() -> str:
    """Where the facade compiles, starting its engine if it is not running: ``"on the
    compile server (pid N), socket PATH"`` (the one this user, toolkit and
    ``$ASYNCCOMP_SERVER_DIR`` share; ``asynccomp serve --status`` shows it) or ``"in
    process"``. The facade also logs it (logger ``asynccomp.tvm``, INFO) as it starts."""
    engine()
    return _runtime.where


def _where(started: SyncEngine, server: str | None) -> str:
    said = started.where
    if not said.startswith("on the compile server"):
        return said
    if server == "auto":
        from ..server import server_paths

        return f"{said}, socket {server_paths().socket}"
    return f"{said}, socket {Path(server or '')}"


def _start(server: str | None) -> SyncEngine:
    # A bad $ASYNCCOMP_REMOTE_CACHE must not fail a TVM build: one warning (here, once),
    # then the local tiers alone, whether on the server or in this process.
    remote = remote_cache_from_environment(strict=False)
    unusable = remote is None and bool(os.environ.get(REMOTE_CACHE_ENV, "").strip())
    if server is not None:
        try:
            # A server started for a remote setting it would refuse would not start.
            on_server = OnServer(server, remote_cache=False if unusable else None)
            started = SyncEngine(mode=on_server)
            started.start()
            return started
        except (ServerError, InvalidJob) as exc:  # no server, or $ASYNCCOMP_SERVER unusable
            warn(
                f"asynccomp.tvm: no compile server ({exc}); compiling in this process with "
                f"one worker (set {SERVER_ENV}=off to use a full engine here)",
                AsyncCompWarning,
            )
            workers: int | None = 1
    else:
        workers = None
    in_process = InProcess(
        WorkerSettings(nvrtc_workers=workers), CacheSettings(remote_cache=remote or False)
    )
    started = SyncEngine(mode=in_process)
    started.start()
    return started


def compile_job(job: CompileJob) -> CompileResult:
    """Compile on the facade engine, blocking the calling thread."""
    try:
        return engine().compile(job)
    except EngineClosed:
        # shutdown() from another thread closed it between lookup and call: start anew.
        return engine().compile(job)


def shutdown() -> None:
    """Close this process's facade engine: prefetched compiles still queued or running
    are stopped (an autotuner that exits early does not wait for a batch it pushed
    ahead); compiles a caller waits for are finished first.

    Safe to call at any time: the next compile starts a fresh engine, which also picks
    up a changed ``$ASYNCCOMP_CACHE_DIR``.
    """
    runtime = _runtime
    with runtime.lock:
        runtime.generation += 1
        closing, runtime.engine = runtime.engine, None
        starter = runtime.starter
    if closing is not None:
        closing.close(cancel_prefetched=True)
    if starter is not None and starter is not threading.current_thread():
        starter.join()  # it started the engine just closed, or starts none


def _forget_after_fork() -> None:
    global _runtime
    _inherited.append(_runtime)
    _runtime = _Runtime()  # a fresh lock too: the parent's may have been held at fork


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_forget_after_fork)
atexit.register(shutdown)
