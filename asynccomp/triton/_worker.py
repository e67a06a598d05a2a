"""What runs in a Triton worker process: :func:`warm_up` once where the workers come
from (the template they are forked from), then :func:`build` for each compile.

:func:`build` runs ``triton.compile`` itself (Triton's MLIR and LLVM passes, then its
bundled ``ptxas``), with the parent's Triton settings, into Triton's cache (the parent's
``TRITON_CACHE_DIR``), and sends back what Triton's cache keeps of the kernel: every file
of its cache group (the IRs, the cubin, the metadata JSON), byte for byte. The parent puts
them in its cache where they are not already there and makes the ``CompiledKernel`` from
them as Triton's own cache hit does (:mod:`._compile`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ._transport import CannotTravel, Packed, unpack

__all__ = (
    "Built",
    "KeyMismatch",
    "TASK_VARIABLES",
    "Request",
    "build",
    "environment",
    "warm_up",
)

#: The environment variables of the parent's that reach a compile: Triton's settings
#: (``triton.knobs`` reads them; knobs set in Python write them) and those its C++ reads
#: (MLIR/LLVM dumps and debugging, ptxas options), set for every compile.
TASK_VARIABLES = (
    "TRITON_",
    "MLIR_",
    "LLVM_",
    "NVPTX_",
    "PTXAS_",
    "AMDGCN_",
    "DISABLE_",
    "USE_IR_LOC",
)


@dataclasses.dataclass(frozen=True)
class Request:
    """One compile, as the parent asks it (``source`` packed by :mod:`._transport`)."""

    source: Packed  # (fn, signature, constants, attrs) of an ASTSource
    target: Any  # a GPUTarget
    options: dict[str, Any]
    env_vars: dict[str, str]  # the cache-invalidating ones, as triton.compile's _env_vars
    key: str  # Triton's cache key as the parent computes it
    environ: dict[str, str]  # the parent's Triton environment (environment())
    sys_path: list[str]


@dataclasses.dataclass(frozen=True)
class Built:
    """A kernel compiled (or found in Triton's cache) in a worker."""

    hash: str  # Triton's hash of the kernel (its cache folder's key)
    files: dict[str, bytes]  # its cache group: file name -> content
    metadata: dict[str, Any]  # what Triton hands its compilation listener
    times: Any  # triton.knobs.CompileTimes (None: not measured)
    cache_hit: bool  # Triton's cache in the worker had it
    seconds: float


class KeyMismatch(Exception):
    """The worker's Triton cache key of the kernel differs from the parent's: it would
    build another kernel (a source file edited since the parent imported it, another
    Triton setting); the parent compiles this one itself."""

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), self.args)


def environment() -> dict[str, str]:
    """The parent's environment variables that a compile reads (see ``TASK_VARIABLES``)."""
    return {k: v for k, v in os.environ.items() if k.startswith(TASK_VARIABLES)}


def _apply(environ: Mapping[str, str]) -> None:
    for name in [k for k in os.environ if k.startswith(TASK_VARIABLES) and k not in environ]:
        del os.environ[name]
    os.environ.update(environ)


def _warm_kernel() -> Any:
    """A tiny kernel, defined (and so imported) only in the worker."""
    import triton
    import triton.language as tl

    @triton.jit
    def asynccomp_warm_up(x, n):  # type: ignore[no-untyped-def]  # Triton reads annotations
        i = tl.program_id(0)
        tl.store(x + i, tl.load(x + i) + 1.0, mask=i < n)

    return asynccomp_warm_up


def warm_up(sys_path: list[str]) -> None:
    """The workers' initializer: Triton imported, and one tiny kernel compiled (into a
    cache folder of its own, then removed), so that the first compile of each worker does
    not pay for Triton's first one (MLIR and LLVM set up, ``ptxas --version``): 1.2 s
    instead of 0.35 s for a small matmul here. It leaves the process with one thread, so
    the workers are forked from it."""
    for entry in reversed(sys_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    import triton
    import triton.compiler.compiler
    import triton.language
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    folder = tempfile.mkdtemp(prefix="asynccomp-triton-warm-")
    saved = os.environ.get("TRITON_CACHE_DIR")
    os.environ["TRITON_CACHE_DIR"] = folder
    try:
        source = ASTSource(_warm_kernel(), {"x": "*fp32", "n": "i32"}, {})
        try:
            triton.compile(source, target=GPUTarget("cuda", 90, 32))
        except Exception:  # a warm-up only: the real compiles will tell what is wrong
            logging.getLogger("asynccomp.triton").debug("warm-up compile failed", exc_info=True)
    finally:
        if saved is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = saved
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def _listening() -> Iterator[dict[str, Any]]:
    """Triton's compilation listener for one compile: its times, metadata, cache hit."""
    from triton import knobs

    heard: dict[str, Any] = {}

    def listener(**kwargs: Any) -> None:
        heard.update(kwargs)

    knobs.compilation.listener = listener
    try:
        yield heard
    finally:
        knobs.compilation.listener = None


@contextlib.contextmanager
def _alone(manager: Any) -> Iterator[None]:
    """Hold the kernel's lock in Triton's cache folder (``FileCacheManager.lock_path``,
    which Triton 3.6 names but does not use) while compiling it: another process's
    worker compiling the same kernel at the same time (each rank of a job autotuning the
    same kernels) waits, then finds it in Triton's cache, instead of compiling it again.
    A cache without a folder of its own (a custom or remote manager), or one that cannot
    be locked, is not locked."""
    path = getattr(manager, "lock_path", None)
    if not path:
        yield
        return
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def build(request: Request) -> Built:
    """A task: compile ``request`` with ``triton.compile``; :class:`Built`, or what
    Triton raised (a ``CompilationError``, a ``PTXASError``...), or :class:`KeyMismatch`,
    or :class:`~._transport.CannotTravel` where the kernel does not load here."""
    start = time.monotonic()
    for entry in reversed(request.sys_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    _apply(request.environ)
    import hashlib

    import triton
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend
    from triton.runtime.cache import get_cache_key, get_cache_manager

    try:
        fn, signature, constants, attrs = unpack(request.source)
    except CannotTravel:
        raise
    except Exception as exc:  # an import that fails here, a module edited since
        raise CannotTravel(
            f"the kernel did not load in the worker ({type(exc).__name__}: {exc})"
        ) from None
    source = ASTSource(fn, signature, None, attrs)
    source.constants = constants
    backend = make_backend(request.target)
    options = backend.parse_options(dict(request.options, **source.parse_options()))
    key = get_cache_key(source, backend, options, env_vars=request.env_vars)
    if key != request.key:
        raise KeyMismatch(_difference(request.key, source, backend, options))
    digest = hashlib.sha256(key.encode("utf-8")).hexdigest()
    with _alone(get_cache_manager(digest)), _listening() as heard:
        kernel = triton.compile(
            source, target=request.target, options=request.options, _env_vars=request.env_vars
        )
    files = {name: Path(path).read_bytes() for name, path in kernel.metadata_group.items()}
    return Built(
        hash=digest,
        files=files,
        metadata=dict(heard.get("metadata") or kernel.metadata._asdict()),
        times=heard.get("times"),
        cache_hit=bool(heard.get("cache_hit", False)),
        seconds=time.monotonic() - start,
    )


def _difference(parent_key: str, source: Any, backend: Any, options: Any) -> str:
    """Which part of Triton's cache key (``get_cache_key``: Triton, the source, the
    backend, the options, the environment) differs from the parent's."""
    parts = (
        ("the kernel's source", source.hash()),
        ("the backend (its ptxas)", backend.hash()),
        ("the compile options", options.hash()),
    )
    for name, part in parts:
        if f"-{part}-" not in parent_key:
            reason = f"{name} differs between this process and the worker"
            if name == "the kernel's source":
                reason += (
                    " (its file edited since this process imported it, or a global it "
                    "reads set at run time)"
                )
            return reason
    return "Triton itself or its environment differs between this process and the worker"
