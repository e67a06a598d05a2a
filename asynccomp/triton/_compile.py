"""One Triton compile on the workers, from this process's side: what ``triton.compile``
does, with the compiling done in a worker.

:func:`start` computes Triton's cache key of the compile as ``triton.compile`` does
(``get_cache_key`` of the source, backend, options and environment); a kernel Triton's
cache already holds is answered here, by Triton (no worker). Otherwise the source goes to
a worker (:mod:`._transport`), unless it cannot (then Triton compiles it here, after a
:class:`~asynccomp.triton.TritonFallbackWarning` naming why), and an identical compile
already on its way is shared. :func:`finish` takes the worker's answer: the files of the
kernel's cache group go into this process's Triton cache where they are not already
there (a worker shares the cache folder, so usually they are), and the kernel is
``CompiledKernel(source, group, hash)``, as Triton's own cache hit makes it (its
compilation listener, where set, hears of it with the worker's times). So the kernel is
Triton's, byte for byte, and the next process finds it in Triton's cache as its own.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import sys
import threading
import warnings
from typing import Any

from ..errors import TaskFailed
from ..workers import PoolStatistics, TaskHandle, TaskResult, WorkerPool
from . import _pool
from ._errors import TritonCompileCrashed, TritonCompileTimeout
from ._transport import CannotTravel, pack
from ._version import TritonFallbackWarning
from ._worker import Built, KeyMismatch, Request, build, environment

__all__ = (
    "TIMEOUT",
    "Job",
    "TritonStatistics",
    "compile_source",
    "count",
    "finish",
    "own_compile",
    "set_timeout",
    "start",
    "statistics",
    "timeout",
)

#: Seconds one compile may take in its worker before it is killed, by default
#: (register(timeout=...)): Triton's compiles take seconds; one that hangs would hold
#: its caller (an autotune) for ever.
TIMEOUT = 600.0
_timeout: float | None = TIMEOUT


def timeout() -> float | None:
    """The JIT's compile timeout, as :func:`~asynccomp.triton.register` set it."""
    return _timeout


def set_timeout(seconds: float | None) -> None:
    global _timeout
    if seconds is not None and not seconds > 0:
        from ..errors import SettingsError

        raise SettingsError("timeout", seconds, "must be a positive number of seconds or None")
    _timeout = seconds


@dataclasses.dataclass
class _Counts:
    compiled: int = 0
    cache_hits: int = 0
    errors: int = 0
    crashed: int = 0
    timed_out: int = 0
    in_process: int = 0
    shared: int = 0
    worker_seconds: float = 0.0
    short_benchmarks: int = 0
    full_benchmarks: int = 0
    short_benchmark_seconds: float = 0.0
    full_benchmark_seconds: float = 0.0
    compile_wait_seconds: float = 0.0


@dataclasses.dataclass(frozen=True)
class TritonStatistics:
    """What :mod:`asynccomp.triton` has done in this process (:func:`statistics`)."""

    compiled: int  # kernels built in workers
    cache_hits: int  # answered by Triton's cache (here, or in a worker: built meanwhile)
    errors: int  # compiles that raised Triton's own exception (a compile error, ptxas...)
    crashed: int  # workers that died compiling (TritonCompileCrashed)
    timed_out: int  # compiles past their timeout (TritonCompileTimeout)
    in_process: int  # compiled here, as Triton alone does (TritonFallbackWarning says why)
    shared: int  # compiles answered by an identical one already on its way
    worker_seconds: float  # the workers' time on the compiles, summed
    short_benchmarks: int  # autotune configs benchmarked briefly (register(screen=...))
    full_benchmarks: int  # autotune configs benchmarked with the autotuner's own benchmark
    # Where an autotune's first call goes: its benchmarks' wall time (brief and full), and
    # the time it waited for a compile with no config ready to benchmark.
    short_benchmark_seconds: float
    full_benchmark_seconds: float
    compile_wait_seconds: float
    workers: PoolStatistics | None  # the worker pool's, while it runs


_lock = threading.Lock()
_counts = _Counts()
_inflight: dict[str, tuple[TaskHandle, WorkerPool]] = {}  # Triton's hash -> its compile
#: Triton functions (by cache key) a worker could not load: they compile here from then
#: on (an autotune's configs would otherwise each go to a worker and come back).
_stay_here: dict[str, str] = {}


def count(**changes: float) -> None:
    with _lock:
        for name, change in changes.items():
            setattr(_counts, name, getattr(_counts, name) + change)


def statistics() -> TritonStatistics:
    pool = _pool.current()
    with _lock:
        counts = dataclasses.asdict(_counts)
    return TritonStatistics(**counts, workers=pool.statistics() if pool is not None else None)


@dataclasses.dataclass
class Job:
    """One compile on its way (see the module's doc)."""

    source: Any  # the ASTSource, this process's: the kernel is made with it
    target: Any
    options: dict[str, Any] | None
    env_vars: dict[str, str]
    hash: str = ""
    timeout: float | None = None
    handle: TaskHandle | None = None
    pool: WorkerPool | None = None  # the pool it went to
    hit: bool = False  # Triton's cache here has it
    own: str | None = None  # why Triton compiles it here instead


def _why_here() -> str | None:
    """A setting of this process's that a worker cannot share, which changes what Triton
    builds: Triton compiles here then."""
    from triton import knobs

    if knobs.runtime.add_stages_inspection_hook is not None:
        return (
            "a compiler pipeline hook (triton.knobs.runtime.add_stages_inspection_hook) "
            "is set in this process, and the workers cannot run it"
        )
    try:
        from triton.backends.nvidia.compiler import CUDABackend
    except ImportError:
        return None
    if getattr(CUDABackend, "instrumentation", None) is not None:
        return "Triton's instrumentation (Proton) is on in this process"
    return None


def start(
    source: Any,
    target: Any = None,
    options: dict[str, Any] | None = None,
    env_vars: dict[str, str] | None = None,
    *,
    timeout: float | None = TIMEOUT,
) -> Job:
    """Start compiling ``source`` as ``triton.compile(source, target, options,
    _env_vars=env_vars)`` would (see the module's doc). Raises what Triton raises before
    it compiles (bad options, no GPU to ask for a target)."""
    from triton import knobs
    from triton._C.libtriton import get_cache_invalidating_env_vars
    from triton.compiler.compiler import make_backend
    from triton.runtime.cache import get_cache_key, get_cache_manager
    from triton.runtime.driver import driver

    if target is None:
        target = driver.active.get_current_target()
    if env_vars is None:
        env_vars = get_cache_invalidating_env_vars()
    job = Job(source, target, options, env_vars, timeout=timeout)
    why = _why_here()
    if why is not None:
        job.own = why
        return job
    backend = make_backend(target)
    parsed = backend.parse_options(dict(options or {}, **source.parse_options()))
    key = get_cache_key(source, backend, parsed, env_vars)
    job.hash = hashlib.sha256(key.encode("utf-8")).hexdigest()
    if not knobs.compilation.always_compile:
        name = f"{source.name[:150]}.json"
        group = get_cache_manager(job.hash).get_group(name)
        if group and group.get(name):  # Triton's test of a hit
            job.hit = True
            return job
    with _lock:
        running = _inflight.get(job.hash)
        if running is not None and not running[0].done():
            _counts.shared += 1
            job.handle, job.pool = running
            return job
    with _lock:
        why = _stay_here.get(source.fn.cache_key)
    if why is not None:
        job.own = why
        return job
    try:
        packed = pack((source.fn, source.signature, source.constants, source.attrs))
    except CannotTravel as exc:
        job.own = str(exc)
        return job
    except Exception as exc:  # a constexpr, a global that does not pickle
        job.own = f"the kernel's arguments do not pickle ({type(exc).__name__}: {exc})"
        return job
    request = Request(
        source=packed,
        target=target,
        options=dict(options or {}),
        env_vars=dict(env_vars),
        key=key,
        environ=environment(),
        sys_path=list(sys.path),
    )
    workers = _pool.pool()
    with _lock:  # checked again: another thread may have sent it meanwhile
        running = _inflight.get(job.hash)
        if running is not None and not running[0].done():
            _counts.shared += 1
            job.handle, job.pool = running
            return job
        handle = workers.submit(build, request, timeout=timeout)
        _inflight[job.hash] = (handle, workers)

    def forget(done: TaskHandle, key: str = job.hash) -> None:
        with _lock:
            running = _inflight.get(key)
            if running is not None and running[0] is done:
                del _inflight[key]

    handle.add_done_callback(forget)
    job.handle, job.pool = handle, workers
    return job


def _warn(source: Any, why: str) -> None:
    warnings.warn(
        f"asynccomp.triton: compiling {source.name} in this process, as Triton does "
        f"without asynccomp (no worker): {why}",
        TritonFallbackWarning,
        stacklevel=4,
    )


def own_compile(job: Job) -> Any:
    """Triton's own ``triton.compile`` of the job, here."""
    from triton.compiler.compiler import compile as triton_compile

    return triton_compile(
        job.source, target=job.target, options=job.options, _env_vars=job.env_vars
    )


def finish(job: Job, task: TaskResult | None = None) -> Any:
    """The job's kernel (Triton's ``CompiledKernel``), or the exception its compile
    raised: ``task`` is its worker task's result (``None``: it had none)."""
    if job.hit:
        count(cache_hits=1)
        return own_compile(job)  # Triton's cache hit, as Triton makes it
    if job.own is not None or task is None:
        _warn(job.source, job.own or "it never reached a worker")
        count(in_process=1)
        return own_compile(job)
    count(worker_seconds=task.elapsed)
    if task.outcome == "done":
        built: Built = task.value
        if built.hash != job.hash:  # cannot be: the worker checked the key
            raise TaskFailed(f"the worker built {built.hash}, not {job.hash}")
        # Triton's cache in the worker had it: another process built it meanwhile.
        count(**{"cache_hits" if built.cache_hit else "compiled": 1})
        return _kernel(job, built)
    if task.outcome == "error":
        error = task.value
        if isinstance(error, CannotTravel):
            with _lock:
                _stay_here[job.source.fn.cache_key] = str(error)
        if isinstance(error, KeyMismatch | CannotTravel | TaskFailed):
            # The worker cannot build this kernel (or its exception cannot travel):
            # Triton, here, builds it or raises its own exception.
            _warn(job.source, str(error))
            count(in_process=1)
            return own_compile(job)
        count(errors=1)
        raise copy.copy(error) if isinstance(error, BaseException) else TaskFailed(str(error))
    if task.outcome == "timeout":
        count(timed_out=1)
        raise TritonCompileTimeout(
            f"compiling the Triton kernel {job.source.name} took more than {job.timeout} s "
            "in its asynccomp worker, which was killed (asynccomp.triton.register(timeout=...))",
            timeout=job.timeout or 0.0,
        )
    if task.outcome == "crashed" and job.pool is not None and job.pool.closed:
        why = (
            "its workers were ended before it compiled (asynccomp.triton.close(), "
            "unregister(), or another worker count asked for)"
        )
        _warn(job.source, why)
        count(in_process=1)
        return own_compile(job)
    if task.outcome in ("crashed", "memory"):
        count(crashed=1)
        raise TritonCompileCrashed(
            f"the asynccomp worker compiling the Triton kernel {job.source.name} died "
            f"({task.value}: Triton's compiler crashed in it, or it was killed; "
            "in Triton's own process this would have ended the program). The other "
            "kernels are not affected"
        )
    # start_failed: no worker can start; cancelled: another caller of this shared compile
    # was interrupted. Triton builds it here.
    _warn(job.source, f"the workers could not compile it ({task.outcome}: {task.value})")
    count(in_process=1)
    return own_compile(job)


def _kernel(job: Job, built: Built) -> Any:
    """The ``CompiledKernel`` of the files ``built`` holds, from this process's Triton
    cache, as Triton's cache hit makes it."""
    from triton import knobs
    from triton.compiler.compiler import CompiledKernel
    from triton.runtime.cache import get_cache_manager

    manager = get_cache_manager(job.hash)
    name = f"{job.source.name[:150]}.json"
    group = manager.get_group(name)
    if not group or set(group) != set(built.files):  # a worker with another cache
        group = {file: manager.put(data, file, binary=True) for file, data in built.files.items()}
        manager.put_group(name, group)
    kernel = CompiledKernel(job.source, group, job.hash)
    listener = knobs.compilation.listener
    if listener is not None and built.times is not None:
        listener(
            src=job.source,
            metadata=built.metadata,
            metadata_group=group,
            times=built.times,
            cache_hit=built.cache_hit,
        )
    return kernel


def compile_source(
    source: Any,
    target: Any = None,
    options: dict[str, Any] | None = None,
    _env_vars: dict[str, str] | None = None,
    *,
    timeout: float | None = TIMEOUT,
) -> Any:
    """Blocking: ``triton.compile(source, target, options, _env_vars)``, compiled in a
    worker (see the module's doc)."""
    job = start(source, target, options, _env_vars, timeout=timeout)
    task = None
    if job.handle is not None:
        try:
            task = job.handle.result()
        except BaseException:  # Ctrl-C: nobody waits for it any more
            job.handle.cancel()
            raise
    return finish(job, task)
