"""What :func:`register` puts in Triton's place, and takes back.

- ``JITFunction._do_compile`` (where a ``@triton.jit`` kernel's first call on a device,
  its ``warmup`` and its autotune configs compile): Triton's, after pointing the
  function's ``compile`` (which Triton's ``create_binder`` sets to ``triton.compile``) at
  :func:`jit_compile`, which compiles on the workers while registered and is Triton's
  ``triton.compile`` otherwise (a function keeps it after :func:`unregister`).
- The autotuner (:mod:`._autotune`), unless ``register(autotune=False)``.

``triton.compile`` itself is not replaced: called directly it is Triton's
(:func:`~asynccomp.triton.compile_many` is the door for many of those).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
import warnings
from collections.abc import Iterator
from typing import Any

from . import _autotune, _compile, _pool
from ._version import TritonVersionWarning, unsupported

__all__ = ("enabled", "jit_compile", "parallel", "register", "registered", "unregister")

_lock = threading.RLock()
_originals: dict[str, Any] = {}


def registered() -> bool:
    """Whether Triton's compiles go to asynccomp's workers now."""
    return bool(_originals)


def jit_compile(src: Any, target: Any = None, options: Any = None, _env_vars: Any = None) -> Any:
    """``triton.compile`` as a ``JITFunction`` calls it: on the workers while registered
    (a plain ``ASTSource``; Gluon's and IR files stay Triton's), else Triton's own."""
    from triton.compiler.compiler import ASTSource
    from triton.compiler.compiler import compile as triton_compile

    if not _originals or type(src) is not ASTSource:
        return triton_compile(src, target=target, options=options, _env_vars=_env_vars)
    return _compile.compile_source(src, target, options, _env_vars, timeout=_compile.timeout())


def _do_compile(self: Any, *args: Any, **kwargs: Any) -> Any:
    from triton.compiler.compiler import compile as triton_compile

    if self.__dict__.get("compile") is triton_compile:  # as Triton's create_binder set it
        self.compile = jit_compile
    return _originals["do_compile"](self, *args, **kwargs)


def register(
    *,
    workers: int | None = None,
    timeout: float | None = _compile.TIMEOUT,
    autotune: bool = True,
    screen: _autotune.Screen | bool = False,
) -> bool:
    """Compile Triton's kernels on asynccomp's warm worker processes, from now on (see
    :mod:`asynccomp.triton`). ``workers``: how many (default: one per CPU but one, which
    is left to this process: it benchmarks the autotuner's configs while the workers
    compile, and a benchmark starved of CPU measures its own waiting); ``timeout``:
    seconds one compile may run in its worker (``None``: no limit); ``autotune``: also
    compile every config of an ``@triton.autotune`` at once and benchmark each as it is
    ready; ``screen``: benchmark those configs briefly first and in full only those that
    can win (:class:`Screen`; ``True``: its defaults; off by default, where every config
    gets Triton's own benchmark). The workers start now, in the background. Idempotent (a
    second call updates the settings).

    Returns ``True``; ``False`` (after a :class:`TritonVersionWarning`, nothing replaced)
    where the installed Triton is not one this module supports. Raises ``ImportError``
    without Triton.
    """
    why = unsupported()
    if why is not None:
        warnings.warn(
            f"asynccomp.triton: {why}; Triton compiles in this process, as it does "
            "without asynccomp",
            TritonVersionWarning,
            stacklevel=2,
        )
        return False
    from triton.runtime.jit import JITFunction

    with _lock:
        _autotune.set_screen(screen)
        _pool.set_size(workers or max(1, _pool.cpus() - 1))
        _compile.set_timeout(timeout)
        if not _originals:
            _originals["do_compile"] = JITFunction._do_compile
            JITFunction._do_compile = _do_compile
        if autotune:
            _autotune.install()
        else:
            _autotune.uninstall()
        _pool.pool()  # started (or resized) in the background
    return True


def unregister() -> None:
    """Triton's own functions back (idempotent), and the workers ended."""
    with _lock:
        if _originals:
            from triton.runtime.jit import JITFunction

            JITFunction._do_compile = _originals.pop("do_compile")
            _autotune.uninstall()
            _autotune.set_screen(False)
        _pool.close()


@contextlib.contextmanager
def enabled(
    *,
    workers: int | None = None,
    timeout: float | None = _compile.TIMEOUT,
    autotune: bool = True,
    screen: _autotune.Screen | bool = False,
) -> Iterator[bool]:
    """:func:`register` for a ``with`` block: Triton's own functions back after it.
    Where it was registered before the block, it is left as it was (settings included).
    Yields what :func:`register` returned."""
    with _lock:
        if registered():  # the settings it was registered with stay
            done, mine = True, False
        else:
            done = register(workers=workers, timeout=timeout, autotune=autotune, screen=screen)
            mine = done
    try:
        yield done
    finally:
        if mine:
            unregister()


@contextlib.contextmanager
def parallel(*, workers: int | None = None) -> Iterator[Any]:
    """Triton's ``AsyncCompileMode`` over asynccomp's workers, for a ``with`` block: each
    ``@triton.jit`` compile started in it (``kernel.warmup(...)`` of many
    specializations, say) returns at once (Triton's ``FutureKernel``) and compiles in a
    worker, all at once; leaving the block waits for all (Triton finalizes them).
    Registers for the block if it is not registered. Yields Triton's mode."""
    from triton.runtime._async_compile import AsyncCompileMode

    with enabled(workers=workers):
        executor = concurrent.futures.ThreadPoolExecutor(
            _pool.size(), thread_name_prefix="asynccomp-triton"
        )
        try:
            with AsyncCompileMode(executor) as mode:
                yield mode
        finally:
            executor.shutdown(wait=True, cancel_futures=True)
