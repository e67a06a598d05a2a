"""The process-wide engines behind :mod:`asynccomp.tvm`.

TVM calls its compile callback synchronously, from whatever thread builds, often many
at once. Each call here is one blocking-portal call into a :class:`~asynccomp.SyncEngine`
(an event loop in a daemon thread), so every caller shares one set of NVRTC workers,
nvcc slots, the in-flight dedupe and the cache.

- Started lazily, on the first compile, under a lock (many threads may race to it).
- One engine per setting that changes how an engine is built: the TVM preamble fast path
  (``$ASYNCCOMP_TVM_FAST_PATH``) and the dump folder (``$TVM_KERNEL_DUMP``). Usually
  that is one engine; the settings are read at every call, so changing them mid-process
  takes effect at the next compile. The cache folder is read when an engine starts.
- Closed at interpreter exit (``atexit``): the portal thread is a daemon and is still
  alive when ``atexit`` handlers run, so the engine shuts down cleanly and its NVRTC
  worker processes are stopped.
- After ``os.fork()`` the child forgets the parent's engines without touching them (their
  event-loop thread does not exist in the child) and starts its own on first use. The
  forgotten objects are kept referenced so that no finalizer of theirs ever runs there.
"""

from __future__ import annotations

import atexit
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from ..errors import EngineClosed
from ..job import CompileJob
from ..result import CompileResult
from ..sync import SyncEngine

__all__ = (
    "FAST_PATH_ENV",
    "EngineSettings",
    "compile_job",
    "engine_for",
    "fast_path_from_environment",
    "shutdown",
)

#: ``0``/``false``/``no``/``off`` compiles TVM sources as given (byte-identical to TVM);
#: unset or ``1``/``true``/``yes``/``on`` uses the preamble fast path (identical SASS).
FAST_PATH_ENV = "ASYNCCOMP_TVM_FAST_PATH"

_ON = ("", "1", "true", "yes", "on")
_OFF = ("0", "false", "no", "off")


def fast_path_from_environment() -> bool:
    """``$ASYNCCOMP_TVM_FAST_PATH`` as a bool (on when unset); a bad value is a ValueError."""
    value = os.environ.get(FAST_PATH_ENV, "").strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    raise ValueError(f"{FAST_PATH_ENV}={value!r}: expected 1 (on, the default) or 0 (off)")


@dataclass(frozen=True)
class EngineSettings:
    """What distinguishes one facade engine from another."""

    fast_path: bool = True
    dump_dir: Path | None = None


class _Engines:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_settings: dict[EngineSettings, SyncEngine] = {}


_engines = _Engines()
# What a forked child inherited from its parent: never used, never finalized.
_inherited: list[_Engines] = []


def engine_for(settings: EngineSettings) -> SyncEngine:
    """The running engine for ``settings``, started now if there is none."""
    engines = _engines
    engine = engines.by_settings.get(settings)
    if engine is not None:
        return engine
    with engines.lock:
        engine = engines.by_settings.get(settings)
        if engine is None:
            engine = SyncEngine(tvm_fast_path=settings.fast_path, dump_dir=settings.dump_dir)
            engine.start()
            engines.by_settings[settings] = engine
    return engine


def compile_job(settings: EngineSettings, job: CompileJob) -> CompileResult:
    """Compile on the engine for ``settings``, blocking the calling thread."""
    try:
        return engine_for(settings).compile(job)
    except EngineClosed:
        # shutdown() from another thread closed it between lookup and call: start anew.
        return engine_for(settings).compile(job)


def shutdown() -> None:
    """Close this process's facade engines: prefetched compiles still queued or running
    are stopped (an autotuner that exits early does not wait for a batch it pushed
    ahead); compiles a caller waits for are finished first.

    Safe to call at any time: the next compile starts a fresh engine, which also picks
    up a changed ``$ASYNCCOMP_CACHE_DIR``.
    """
    engines = _engines
    with engines.lock:
        closing = list(engines.by_settings.values())
        engines.by_settings.clear()
    for engine in closing:
        engine.close(cancel_prefetched=True)


def _forget_after_fork() -> None:
    global _engines
    _inherited.append(_engines)
    _engines = _Engines()  # a fresh lock too: the parent's may have been held at fork


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_forget_after_fork)
atexit.register(shutdown)
