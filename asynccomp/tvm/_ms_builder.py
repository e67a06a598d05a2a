"""MetaSchedule's builder on warm workers: :func:`Builder`.

``LocalBuilder.build`` starts a fresh ``PopenPoolExecutor`` for every batch (and one more
in its constructor), and each of its workers imports TVM and, at its first build,
``tvm.s_tir.tensor_intrin`` (13-20 s of CPU on 2 cores) inside that candidate's 30 s
timeout. Here the workers (:class:`asynccomp._warm_pool.WarmPool`) start as the builder
is made, import TVM, the tensor intrinsics and MetaSchedule's builder once, register
asynccomp's compile callback (so every CUDA compile goes through the compile server and
its cache), and live across batches. Each candidate runs TVM's own ``_worker_func`` (the
same ``f_build``/``f_export`` defaults, the same artifacts); results and error messages
are ``LocalBuilder``'s, word for word, so logs read the same.

Why the workers live in the tuning process and not in the compile server: the server runs
without TVM (it is shared by every client, TVM or not, and importing TVM costs it 1-2 GB
and seconds per start), and MetaSchedule takes minutes to generate its design spaces after
the builder is made, which covers the workers' start.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .._warm_pool import START_TIMEOUT, TaskResult, WarmPool
from ._facade import register

#: Defaults: recycle a worker after this many builds or past this resident memory (the
#: upstream leak, apache/tvm#11096), and end idle workers after this many seconds.
MAX_USES = 200
MAX_RSS_MIB = 4096
IDLE_RELEASE = 600.0


def _warm_up() -> None:
    """Runs in each worker as it starts, never inside a candidate's timeout."""
    import tvm.s_tir.meta_schedule.builder.local_builder  # default_build, default_export
    import tvm.s_tir.tensor_intrin  # noqa: F401 - default_build imports it at its first call

    register()


def _result(task: TaskResult, timeout_sec: float) -> Any:
    from tvm.s_tir.meta_schedule.builder import BuilderResult

    # LocalBuilder's messages (tvm/s_tir/meta_schedule/builder/local_builder.py): its
    # EXCEPTION text is the worker's traceback, and a dead worker's is popen_pool's
    # ChildProcessError("Subprocess terminated").
    if task.outcome == "done":
        return BuilderResult(task.value, None)
    if task.outcome == "timeout":
        return BuilderResult(None, f"LocalBuilder: Timeout, killed after {timeout_sec} seconds")
    detail = task.value if task.outcome == "error" else "Subprocess terminated"
    return BuilderResult(None, "LocalBuilder: An exception occurred\n" + str(detail))


@functools.cache
def _builder_class() -> type:
    try:
        from tvm.ir.utils import derived_object
        from tvm.s_tir.meta_schedule.builder import PyBuilder
        from tvm.s_tir.meta_schedule.builder.local_builder import (
            _serialize_params,
            _worker_func,
        )
        from tvm.s_tir.meta_schedule.utils import cpu_count
    except ImportError as exc:  # no TVM, or another one (TileLang ships its own `tvm`)
        raise ImportError(
            "asynccomp.tvm.Builder needs Apache TVM 0.27's MetaSchedule "
            f"(pip install 'asynccomp[tvm]'): {exc}"
        ) from exc

    class WarmBuilder(PyBuilder):  # type: ignore[misc]
        """``LocalBuilder`` on warm workers that outlive the batch."""

        def __init__(
            self,
            *,
            max_workers: int | None = None,
            timeout_sec: float = 30.0,
            f_build: Any = None,
            f_export: Any = None,
            initializer: Callable[[], None] | None = None,
            max_uses: int | None = MAX_USES,
            max_rss_mib: float | None = MAX_RSS_MIB,
            idle_release: float | None = IDLE_RELEASE,
            start_timeout: float | None = START_TIMEOUT,
            register: bool = True,
        ) -> None:
            super().__init__()
            self.max_workers = max_workers or cpu_count(logical=True)
            self.timeout_sec = timeout_sec
            self.f_build = f_build
            self.f_export = f_export
            initializers: list[Callable[[], object]] = [_warm_up] if register else []
            if initializer is not None:
                initializers.append(initializer)
            self.pool = WarmPool(
                self.max_workers,
                initializers,
                timeout=timeout_sec,
                max_uses=max_uses,
                max_rss=None if max_rss_mib is None else int(max_rss_mib * 2**20),
                idle_release=idle_release,
                start_timeout=start_timeout,
            )

        def build(self, build_inputs: list[Any]) -> list[Any]:
            tasks = [
                (
                    self.f_build,
                    self.f_export,
                    build_input.mod,
                    build_input.target,
                    _serialize_params(build_input.params),
                )
                for build_input in build_inputs
            ]
            return [_result(task, self.timeout_sec) for task in self.pool.map(_worker_func, tasks)]

        def close(self) -> None:
            """End every worker now (they also end with this process)."""
            self.pool.close()

    WarmBuilder.__module__ = __name__
    WarmBuilder.__qualname__ = "WarmBuilder"
    return derived_object(WarmBuilder)  # type: ignore[no-any-return]


def Builder(  # a function: the class itself needs TVM to exist
    *,
    max_workers: int | None = None,
    timeout_sec: float = 30.0,
    f_build: Any = None,
    f_export: Any = None,
    initializer: Callable[[], None] | None = None,
    max_uses: int | None = MAX_USES,
    max_rss_mib: float | None = MAX_RSS_MIB,
    idle_release: float | None = IDLE_RELEASE,
    start_timeout: float | None = START_TIMEOUT,
    register: bool = True,
) -> Any:
    """A MetaSchedule builder (``ms.builder.PyBuilder``) on warm worker processes:
    ``ms.tune_tir(..., builder=asynccomp.tvm.Builder())``.

    ``max_workers``, ``timeout_sec``, ``f_build``, ``f_export`` and ``initializer`` are
    ``LocalBuilder``'s (``max_workers``: the CPU count). The workers start now, so they are
    warm by the first batch; ``timeout_sec`` counts a candidate's own build only. A
    worker is replaced when it times out or dies (only its candidate fails), recycled
    after ``max_uses`` builds or past ``max_rss_mib`` MiB resident, and ended after
    ``idle_release`` seconds without a batch (``None`` disables each). A worker not ready
    ``start_timeout`` seconds after it starts (TVM's imports take 13-20 s of CPU) is
    killed and started again; the third in a row raises ``WorkerStartFailed``, as a
    failing ``initializer`` does. ``register=False``
    leaves TVM's own compile callback in place. ``builder.close()`` ends the workers at
    once; they end with this process anyway. Needs TVM.
    """
    return _builder_class()(
        max_workers=max_workers,
        timeout_sec=timeout_sec,
        f_build=f_build,
        f_export=f_export,
        initializer=initializer,
        max_uses=max_uses,
        max_rss_mib=max_rss_mib,
        idle_release=idle_release,
        start_timeout=start_timeout,
        register=register,
    )
