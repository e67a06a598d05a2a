"""The facade's public functions (re-exported by :mod:`asynccomp.tilelang`, documented
there).

``compile_cuda`` is :func:`~._render.make_job` + the process-wide engine that
:mod:`asynccomp.tvm` uses too (:mod:`asynccomp.tvm._runtime`: on the compile server by
default, ``$ASYNCCOMP_SERVER`` applies) + TileLang's exception for a failed compile;
:func:`register` makes it TileLang's ``tilelang_callback_cuda_compile``.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..backends._nvrtc_pch_hints import ahead_enabled
from ..job import CompileJob
from ..result import CompileResult
from ..sync import SyncEngine
from ..tvm import _runtime
from . import _offload, _patched, _pool
from ._errors import error_for, register_errors
from ._pch_ahead import Ahead
from ._render import PassConfig, TileLangPaths, make_job

__all__ = (
    "BACKEND_ENV",
    "CALLBACK_NAME",
    "compile_cuda",
    "engine",
    "register",
    "registered",
    "shutdown",
    "tilelang_callback_cuda_compile",
    "unregister",
)

logger = logging.getLogger("asynccomp.tilelang")

#: The tvm-ffi global function TileLang's CUDA codegen calls.
CALLBACK_NAME = "tilelang_callback_cuda_compile"
#: ``nvcc`` (the default: TileLang's command line) or ``nvrtc`` (faster, other SASS),
#: when :func:`register` is not told.
BACKEND_ENV = "ASYNCCOMP_TILELANG_BACKEND"

Backend = Literal["nvcc", "nvrtc"]


@dataclass(frozen=True)
class _Settings:
    backend: Backend | None = None  # None: $ASYNCCOMP_TILELANG_BACKEND, else nvcc
    pch: bool = True
    dump: bool | Path = False
    on_result: Callable[[CompileResult], None] | None = None


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.settings = _Settings()
        self.registered = False
        self.paths: TileLangPaths | None = None
        # The PCH made ahead (_pch_ahead), and what it was made for: made once per
        # target and settings, not at every register().
        self.ahead: Ahead | None = None
        self.ahead_for: tuple[object, ...] | None = None


_state = _State()


def _import_tilelang() -> Any:
    try:
        import tilelang
    except ImportError as exc:
        raise ImportError(
            "asynccomp.tilelang needs TileLang 0.1.15: install torch, then pip install "
            "tilelang==0.1.15 (in asynccomp's checkout: pip install '.[tilelang]') "
            f"({exc})"
        ) from exc
    return tilelang


def _backend(settings: _Settings) -> Backend:
    if settings.backend is not None:
        return settings.backend
    value = os.environ.get(BACKEND_ENV, "nvcc").strip().lower() or "nvcc"
    if value not in ("nvcc", "nvrtc"):
        raise ValueError(f"{BACKEND_ENV}={value!r}: expected nvcc (the default) or nvrtc")
    return value  # type: ignore[return-value]


def _paths() -> TileLangPaths:
    paths = _state.paths
    if paths is None:
        paths = _state.paths = TileLangPaths.installed()
    return paths


def _arch_of(target: object) -> tuple[str, list[str]]:
    """``("sm_90a", code list)`` from TileLang's target as its own callback reads it (no
    ``arch``: TileLang asks the GPU, or raises its ValueError); a ``str`` is an arch."""
    if isinstance(target, str):
        return target, []
    from tilelang.contrib import nvcc
    from tvm.target import Target

    if isinstance(target, Mapping):
        target = Target(dict(target))
    arch, code = nvcc.get_target_arch_and_code(target)
    return f"sm_{arch}", nvcc.get_target_code_list(code)


def compile_cuda(
    code: str,
    target: object,
    pass_config: Mapping[str, object] | None = None,
    *,
    backend: Backend | None = None,
    pch: bool | None = None,
    dump: bool | str | os.PathLike[str] | None = None,
) -> bytes:
    """Compile TileLang kernel source as TileLang's callback does, on asynccomp's engine.

    Args:
        code: the CUDA source TileLang generated (``kernel.get_kernel_source()``).
        target: a ``tvm.target.Target`` (or its dict form), as TileLang passes it, or an
            architecture such as ``"sm_90a"``.
        pass_config: TileLang's pass config (``tl.enable_fast_math``,
            ``tl.ptxas_register_usage_level``, ``tl.device_compile_flags``,
            ``cuda.kernels_output_dir``).
        backend, pch, dump: override :func:`register`'s settings for this call.

    Returns:
        The cubin (a fatbin for a target with several ``code`` entries).

    Raises:
        TileLangCompileError: the compile failed; the message is TileLang's.
        TileLangCompileTimeout: it ran past ``TILELANG_COMPILE_TIMEOUT_SECONDS``.
        ValueError: no architecture (TileLang's message), or a bad setting.
    """
    settings = _state.settings
    chosen = backend or _backend(settings)
    arch, codes = _arch_of(target)
    job = make_job(
        code,
        arch,
        codes,
        PassConfig.read(pass_config),
        backend=chosen,
        pch=settings.pch if pch is None else pch,
        dump=settings.dump if dump is None else dump,
        paths=_paths(),
    )
    result = _runtime.compile_job(job)
    _report(result, settings)
    if not result.ok:
        register_errors()
        raise error_for(result, code) from result.error
    assert result.binary is not None
    return result.binary


def _report(result: CompileResult, settings: _Settings) -> None:
    if logger.isEnabledFor(logging.DEBUG):
        registers = {k: r.registers for k, r in result.resources.items()}
        logger.debug(
            "%s %s %s in %.2f s%s, registers %s",
            result.job.backend,
            "compiled" if result.ok else "failed",
            result.job.arch,
            result.elapsed,
            " (cached)" if result.cached else "",
            registers,
        )
    from tilelang.env import env

    if env.get_default_verbose():  # what TileLang logs itself with TILELANG_VERBOSE
        from tilelang import logger as tilelang_logger

        tilelang_logger.info("NVCC compilation command: %s", " ".join(result.command))
        tilelang_logger.info("PTXAS verbose output:\n%s", result.log)
    if settings.on_result is not None:
        settings.on_result(result)


def tilelang_callback_cuda_compile(
    code: str, target: object, pass_config: Mapping[str, object] | None = None
) -> bytes:
    """TileLang's compile callback, on asynccomp (see :func:`compile_cuda`)."""
    return compile_cuda(code, target, pass_config)


def register(
    *,
    backend: Backend | None = None,
    pch: bool = True,
    dump: bool | str | os.PathLike[str] = False,
    on_result: Callable[[CompileResult], None] | None = None,
    lower_in_workers: bool = True,
    lowering_workers: int | None = None,
    lowering_timeout: float | None = 600.0,
    target: object = "auto",
) -> None:
    """Make TileLang compile CUDA through asynccomp: register
    :func:`tilelang_callback_cuda_compile` as the tvm-ffi global function
    ``tilelang_callback_cuda_compile``, replacing TileLang's (it imports TileLang, which
    registers its own once). Calling it again changes the settings.

    Call it as the program starts, before your own ``import tilelang`` even: the
    lowering workers' template starts first and imports TileLang while this process
    does, and the engine (the compile server) starts in the background, so the first
    autotune finds them started while your program sets up.

    Args:
        backend: ``"nvcc"`` (TileLang's command line, the same SASS), ``"nvrtc"``
            (NVRTC worker processes: faster, not the same SASS as nvcc); ``None``:
            ``$ASYNCCOMP_TILELANG_BACKEND``, else nvcc.
        pch: with NVRTC, keep a precompiled header of TileLang's headers in each
            worker (``CompileJob(pch=True)``): about 2x faster after each worker's
            first kernel, and 250-450 MB of disk per worker while it lives.
        dump: dump every compile (``True``: under ``$ASYNCCOMP_DUMP_DIR`` or
            ``./asynccomp-dumps``; a path: there). TileLang's pass config
            ``cuda.kernels_output_dir`` dumps its kernels there too.
        on_result: called with every :class:`~asynccomp.CompileResult` (log, ptxas
            resources, timings, dump folder), in TileLang's thread, before the
            binary goes back to TileLang.
        lower_in_workers: elaborate and lower the configs of TileLang's autotuner
            (``AutoTuner.run``, ``@tilelang.autotune``, grouped or not) and the
            functions of ``par_compile`` in warm worker processes, TileLang imported
            once in each, and compile them on one thread per CPU, with no lock
            (:mod:`asynccomp.tilelang._offload`); ``False``: TileLang's own threads,
            in this process.
        lowering_workers: how many worker processes (``None``: one per CPU); they
            start now, in the background (forked from one process that imported
            TileLang once), so the first autotune finds them warm.
        lowering_timeout: seconds one config's elaboration and lowering may take in
            its worker (``None``: no limit); past it the worker is killed and that
            config fails with :class:`TileLangCompileTimeout`.
        target: with NVRTC and ``pch`` (and ``lower_in_workers``), the precompiled
            header of TileLang's GEMM headers is made now, in the background, for this
            target (TileLang's ``target=``: ``"auto"``, the GPU's as TileLang finds it,
            or e.g. ``{"kind": "cuda", "arch": "sm_90a"}``; one TileLang refuses is a
            ``ValueError``), so that the first autotune's kernels find it made
            (:mod:`asynccomp.tilelang._pch_ahead`; ``$ASYNCCOMP_PCH_AHEAD=off``: not).
            Unused otherwise.
    """
    if lowering_workers is not None and lowering_workers < 1:
        raise ValueError(f"lowering_workers must be at least 1, got {lowering_workers}")
    if backend not in (None, "nvcc", "nvrtc"):
        raise ValueError(f"backend must be 'nvcc', 'nvrtc' or None, got {backend!r}")
    # (A bad $ASYNCCOMP_TILELANG_BACKEND is refused here, before anything changes.)
    ahead = (
        lower_in_workers
        and pch
        and _backend(_Settings(backend=backend)) == "nvrtc"
        and ahead_enabled()
    )
    if lower_in_workers and importlib.util.find_spec("tilelang") is not None:
        # The workers' template imports TileLang while this process does (a register()
        # before `import tilelang` pays TileLang's import once, in parallel).
        _offload.start(lowering_workers, lowering_timeout)
    _import_tilelang()
    import tvm_ffi

    # A target given for the PCH is checked now (a bad one is the caller's error, not a
    # log line); "auto" asks the GPU, in the background (_pch_ahead).
    auto = isinstance(target, str) and target == "auto"
    arch = _arch_of_target(target) if ahead and not auto else None
    register_errors()
    settings = _Settings(
        backend=backend,
        pch=pch,
        dump=dump if isinstance(dump, bool) else Path(dump).absolute(),
        on_result=on_result,
    )
    with _state.lock:
        _state.settings = settings
        tvm_ffi.register_global_func(CALLBACK_NAME, tilelang_callback_cuda_compile, override=True)
        _state.registered = True
        if lower_in_workers:
            _offload.install(lowering_workers, lowering_timeout)
        else:
            _offload.uninstall()
    # The engine (the compile server, started if none runs) starts now too, overlapped
    # with the user's own set-up. Its NVRTC workers start with the first compiles: a
    # warm-up here showed no gain on 2 cores, where it competes with the two TileLang
    # imports (benchmarks/RESULTS.md, thirteenth session).
    _runtime.start_in_background()
    if ahead:
        _make_pch_ahead(settings, target, arch, lowering_workers)


def _make_pch_ahead(
    settings: _Settings, target: object, arch: tuple[str, list[str]] | None, workers: int | None
) -> None:
    """Start :class:`~._pch_ahead.Ahead` (for ``arch``; ``None``: ``target``'s, found in
    the background) unless one runs, or one was made for the same target and settings."""
    wanted = (repr(target), settings.dump)
    with _state.lock:
        running = _state.ahead is not None and not _state.ahead.join(0)
        if running or _state.ahead_for == wanted:
            return
        _state.ahead_for = wanted
        _state.ahead = Ahead(
            _pool.pool(workers or _patched.workers()),
            functools.partial(_arch_of_target, target) if arch is None else lambda: arch,
            functools.partial(_probe_job, settings),
            functools.partial(_make_pch, _runtime.generation()),
        )


def _make_pch(since: int, job: CompileJob) -> bool:
    """The facade engine's ``make_pch(job)``; ``False`` if :func:`shutdown` came since
    ``since`` (a PCH made ahead never starts an engine after it)."""
    engine = _runtime.engine_unless_shut(since)
    return False if engine is None else engine.make_pch(job)


def _arch_of_target(target: object) -> tuple[str, list[str]]:
    """The architecture and code list TileLang compiles ``target`` for (``"auto"``: the
    GPU's, as TileLang finds it); a ValueError naming a target TileLang refuses (it
    asserts) or one without a GPU to ask."""
    from tilelang.backend.target import determine_target

    try:
        found = determine_target(target, return_object=True)
    except AssertionError as exc:
        raise ValueError(f"target {target!r}: {exc}") from None
    return _arch_of(found)


def _probe_job(settings: _Settings, source: str, arch: str, codes: list[str]) -> CompileJob:
    """The job :func:`compile_cuda` would make of ``source`` (TileLang's default pass
    config: an autotune's, unless told otherwise)."""
    return make_job(
        source,
        arch,
        codes,
        PassConfig.read(None),
        backend="nvrtc",
        pch=True,
        dump=settings.dump,
        paths=_paths(),
    )


def unregister() -> None:
    """Give TileLang its own callback back (``tilelang.cuda.backend``'s)."""
    _import_tilelang()
    import tvm_ffi
    from tilelang.cuda.backend import tilelang_callback_cuda_compile as own

    with _state.lock:
        tvm_ffi.register_global_func(CALLBACK_NAME, own, override=True)
        _state.registered = False
        _state.settings = _Settings()
        _offload.uninstall()


def registered() -> bool:
    """Whether :func:`register` is in effect (and :func:`unregister` was not called)."""
    return _state.registered


def engine() -> SyncEngine:
    """The process-wide engine the facade compiles on (the one :mod:`asynccomp.tvm`
    uses too), started if needed."""
    return _runtime.engine()


def shutdown() -> None:
    """Close the process-wide engine and end the lowering workers now (also done at
    interpreter exit); the next compile starts a fresh engine, the next autotune fresh
    workers."""
    with _state.lock:
        ahead, _state.ahead, _state.ahead_for = _state.ahead, None, None
    _pool.close()
    _runtime.shutdown()
    if ahead is not None:
        # Its probe's worker is gone, and it starts no engine now: it ends at once, or
        # once the PCH it was making is made (closing the engine waits for its calls).
        ahead.join()
