""":func:`compile_many`: many ``triton.compile`` calls at once, on the workers, no GPU
needed."""

from __future__ import annotations

import functools
import queue
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import InvalidJob
from . import _compile, _pool
from ._version import TritonVersionWarning, unsupported

__all__ = ("compile_many",)

_UNSET: Any = object()


def _source(item: Any, index: int) -> Any:
    from triton.compiler.compiler import ASTSource

    if isinstance(item, ASTSource):
        return item
    if isinstance(item, tuple) and len(item) in (3, 4):
        return ASTSource(*item)
    raise InvalidJob(
        f"sources[{index}]",
        item,
        "expected a triton ASTSource or a (fn, signature, constexprs[, attrs]) tuple",
    )


def _target(target: Any) -> Any:
    """The target, or this process's GPU's, as ``triton.compile`` asks the driver."""
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver

    if target is None:
        try:
            return driver.active.get_current_target()
        except RuntimeError as exc:
            raise InvalidJob(
                "target",
                target,
                f"no GPU here to take it from ({exc}): name one, e.g. "
                "triton.backends.compiler.GPUTarget('cuda', 90, 32) for an H100/H200",
            ) from exc
    if not isinstance(target, GPUTarget):
        raise InvalidJob("target", target, "expected a triton.backends.compiler.GPUTarget")
    return target


def _options(options: Any, count: int) -> list[dict[str, Any] | None]:
    if options is None or isinstance(options, Mapping):
        return [dict(options) if options is not None else None] * count
    if isinstance(options, Sequence) and not isinstance(options, str | bytes):
        if len(options) != count:
            raise InvalidJob(
                "options", options, f"gives {len(options)} option sets for {count} sources"
            )
        for option in options:
            if option is not None and not isinstance(option, Mapping):
                raise InvalidJob("options", option, "expected a dict of Triton options")
        return [dict(o) if o is not None else None for o in options]
    raise InvalidJob("options", options, "expected a dict, or one dict (or None) per source")


def compile_many(
    sources: Sequence[Any],
    target: Any = None,
    options: Mapping[str, Any] | Sequence[Mapping[str, Any] | None] | None = None,
    *,
    workers: int | None = None,
    timeout: float | None = _UNSET,
    on_result: Callable[[int, Any], None] | None = None,
) -> list[Any]:
    """Compile many Triton kernels at once on warm worker processes; no GPU needed.

    For each source, what ``triton.compile(source, target=target, options=...)`` returns
    (Triton's ``CompiledKernel``: ``asm["cubin"]`` and every other stage byte for byte
    Triton's, and in Triton's cache as Triton puts it), or the exception it raised
    (Triton's own; :class:`TritonCompileCrashed` where the worker died,
    :class:`TritonCompileTimeout` past ``timeout``), in the order of ``sources``.

    Args:
        sources: Triton ``ASTSource``\\ s, or ``(fn, signature, constexprs)`` /
            ``(fn, signature, constexprs, attrs)`` tuples (made into ``ASTSource``).
        target: a ``triton.backends.compiler.GPUTarget`` (``GPUTarget("cuda", 90, 32)``
            for an H100/H200); default: this process's GPU, as ``triton.compile``'s.
        options: Triton's options (``num_warps``, ``num_stages``...): one dict for all,
            or one dict (or ``None``) per source.
        workers: worker processes (default: as registered, else one per CPU).
        timeout: seconds each compile may take in its worker (default: as registered,
            600 s).
        on_result: called ``on_result(index, kernel_or_exception)`` in this thread as
            each compile ends (completion order): progress.

    Raises :class:`~asynccomp.InvalidJob` for a source or options it cannot read. With
    a Triton this module does not support, each source is compiled here by
    ``triton.compile`` after a :class:`TritonVersionWarning`.
    """
    from triton.compiler.compiler import compile as triton_compile

    items = [_source(item, i) for i, item in enumerate(sources)]
    per_source = _options(options, len(items))
    results: list[Any] = [None] * len(items)

    def record(index: int, value: Any) -> None:
        results[index] = value
        if on_result is not None:
            on_result(index, value)

    why = unsupported()
    if why is not None:
        warnings.warn(
            f"asynccomp.triton: {why}; compile_many compiles in this process with "
            "triton.compile, one kernel at a time",
            TritonVersionWarning,
            stacklevel=2,
        )
        for i, (source, opts) in enumerate(zip(items, per_source, strict=True)):
            try:
                value = triton_compile(source, target=target, options=opts)
            except Exception as exc:
                value = exc
            record(i, value)
        return results

    target = _target(target)
    if workers is not None:
        _pool.set_size(workers)
    # The workers start now, while this thread computes Triton's cache keys (the first
    # one hashes Triton's own library: half a second).
    _pool.pool()
    limit = _compile.timeout() if timeout is _UNSET else timeout
    jobs: list[_compile.Job | None] = []
    for i, (source, opts) in enumerate(zip(items, per_source, strict=True)):
        try:
            jobs.append(_compile.start(source, target, opts, timeout=limit))
        except Exception as exc:  # Triton refused it before compiling (bad options)
            jobs.append(None)
            record(i, exc)
    ended: queue.SimpleQueue[int] = queue.SimpleQueue()
    waiting = 0
    try:
        for i, job in enumerate(jobs):
            if job is not None and job.handle is not None:
                job.handle.add_done_callback(functools.partial(_ended, ended, i))
                waiting += 1
        for i, job in enumerate(jobs):  # answered here: cache hits, kernels that stay here
            if job is not None and job.handle is None:
                record(i, _finished(job, None))
        for _ in range(waiting):
            while True:
                try:  # in slices, so that a Ctrl-C is seen between them
                    i = ended.get(timeout=0.2)
                    break
                except queue.Empty:
                    continue
            job = jobs[i]
            assert job is not None and job.handle is not None
            record(i, _finished(job, job.handle.result()))
    except BaseException:
        for job in jobs:
            if job is not None and job.handle is not None:
                job.handle.cancel()
        raise
    return results


def _ended(ended: queue.SimpleQueue[int], index: int, _: Any) -> None:
    ended.put(index)


def _finished(job: _compile.Job, task: Any) -> Any:
    try:
        return _compile.finish(job, task)
    except Exception as exc:
        return exc
