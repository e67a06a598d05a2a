"""MetaSchedule's builder on warm workers: :func:`Builder`.

``LocalBuilder.build`` starts a fresh ``PopenPoolExecutor`` for every batch (and one more
in its constructor), and each of its workers imports TVM and, at its first build,
``tvm.s_tir.tensor_intrin`` (13-20 s of CPU on 2 cores, most of it in ``inspect.stack``:
see :mod:`asynccomp.tvm._frames`) inside that candidate's 30 s timeout. Here the
workers (:class:`asynccomp.workers.WorkerPool`) start as the builder is made, forked from
a template that imported TVM, the tensor intrinsics (in 1-2 s there) and MetaSchedule's
builder once; they register asynccomp's compile callback (so every CUDA
compile goes through asynccomp's engine and its cache) and live across batches. Each
candidate runs TVM's own ``_worker_func`` (the same ``f_build``/``f_export`` defaults, the
same artifacts); results and error messages are ``LocalBuilder``'s, word for word, so
logs read the same.

Why the workers live in the tuning process and not in the compile server: the server runs
without TVM (it is shared by every client, TVM or not, and importing TVM costs it 1-2 GB
and seconds per start), and MetaSchedule takes minutes to generate its design spaces after
the builder is made, which covers the workers' start.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..workers import PoolSettings, TaskResult, WorkerPool, shared_folder
from ._facade import register
from ._frames import import_tensor_intrinsics

#: Defaults: recycle a worker after this many builds or past this resident memory (the
#: upstream leak, apache/tvm#11096), kill one whose candidate passes ``memory_limit_mib``
#: while it builds, end idle workers after this many seconds, and give a worker this
#: long to get ready (TVM's imports take 13-20 s of CPU on a loaded machine).
MAX_USES = 200
MAX_RSS_MIB = 4096
MEMORY_LIMIT_MIB = 16384
IDLE_RELEASE = 600.0
START_TIMEOUT = 300.0


def _import_tvm() -> None:
    """Runs once where the workers come from, never inside a candidate's timeout. The
    tensor intrinsics (``default_build`` imports them at its first call) parse 496
    TVMScript functions, each calling ``inspect.stack()``: 19 s on 2 cores, 1-2 s with
    :func:`~asynccomp.tvm._frames.quick_frames`."""
    import tvm.s_tir.meta_schedule.builder.local_builder  # noqa: F401 - default_build...

    import_tensor_intrinsics()


def _result(task: TaskResult, timeout_sec: float) -> Any:
    from tvm.s_tir.meta_schedule.builder import BuilderResult

    # LocalBuilder's messages (tvm/s_tir/meta_schedule/builder/local_builder.py): its
    # EXCEPTION text is the worker's traceback, and a dead worker's is popen_pool's
    # ChildProcessError("Subprocess terminated").
    if task.outcome == "done":
        return BuilderResult(task.value, None)
    if task.outcome == "timeout":
        return BuilderResult(None, f"LocalBuilder: Timeout, killed after {timeout_sec} seconds")
    if task.outcome == "start_failed":
        raise task.value  # WorkerStartFailed: the builder cannot build anything here
    if task.outcome == "error":
        detail = task.traceback or str(task.value)
    elif task.outcome == "memory":
        detail = f"Subprocess terminated: {task.value}"
    else:
        detail = "Subprocess terminated"
    return BuilderResult(None, "LocalBuilder: An exception occurred\n" + detail)


def asynccomp_register() -> None:
    """The workers' initializer: asynccomp's compile callback in place of TVM's (every
    candidate's CUDA compile on this user's compile server, as the facade does by
    default: measured on 16 cores, a 64-trial tune_tir's builder stage took 23-32 s so,
    75 s with each worker compiling its own candidate); the toolkit's location found once,
    where the workers are forked from."""
    from ..toolkit import locate_toolkit

    register()
    locate_toolkit()  # file lookups only: inherited by every worker


def _bytes(mib: float | None) -> int | None:
    return None if mib is None else int(mib * 2**20)


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
            "(pip install 'apache-tvm==0.27.0.post1'; in asynccomp's checkout: "
            f"pip install '.[tvm]'): {exc}"
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
            memory_limit_mib: float | None = MEMORY_LIMIT_MIB,
            idle_release: float | None = IDLE_RELEASE,
            start_timeout: float | None = START_TIMEOUT,
            register: bool = True,
        ) -> None:
            super().__init__()
            self.max_workers = max_workers or cpu_count(logical=True)
            self.timeout_sec = timeout_sec
            self.f_build = f_build
            self.f_export = f_export
            # TVM is imported where the workers come from whatever ``register`` says:
            # never inside a candidate's timeout (a worker that imports TVM in its first
            # candidate times out, and its replacement starts cold again).
            initializers: list[Callable[[], object]] = [_import_tvm]
            if register:
                initializers.append(asynccomp_register)
            if initializer is not None:
                initializers.append(initializer)
            self.pool = WorkerPool(
                PoolSettings(
                    "tvm-builder",
                    self.max_workers,
                    initializers,
                    start_timeout=start_timeout,
                    max_uses=max_uses,
                    max_rss=_bytes(max_rss_mib),
                    memory_limit=_bytes(memory_limit_mib),
                    idle_release=idle_release,
                    share_in=shared_folder(),
                )
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
            results = self.pool.map(_worker_func, tasks, timeout=self.timeout_sec)
            return [_result(task, self.timeout_sec) for task in results]

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
    memory_limit_mib: float | None = MEMORY_LIMIT_MIB,
    idle_release: float | None = IDLE_RELEASE,
    start_timeout: float | None = START_TIMEOUT,
    register: bool = True,
) -> Any:
    """A MetaSchedule builder (``ms.builder.PyBuilder``) on warm worker processes:
    ``ms.tune_tir(..., builder=asynccomp.tvm.Builder())``.

    ``max_workers``, ``timeout_sec``, ``f_build``, ``f_export`` and ``initializer`` are
    ``LocalBuilder``'s (``max_workers``: the CPU count). The workers start now, so they are
    warm by the first batch: TVM and its tensor intrinsics are imported once, in a template
    process the workers are forked from (or in each worker, where forking is not safe),
    never inside a candidate's timeout; ``timeout_sec`` counts a candidate's own build
    only. A worker is replaced when it times out or dies (only its candidate fails),
    recycled after ``max_uses`` builds or past ``max_rss_mib`` MiB resident after a
    build, killed (its candidate failed) once it passes ``memory_limit_mib`` MiB while
    it builds, and ended after ``idle_release`` seconds without a batch (``None``
    disables each). Workers not ready ``start_timeout`` seconds after they start are
    killed and started again; the third in a row raises ``WorkerStartFailed``, as a
    failing ``initializer`` does. ``register=False`` leaves TVM's own compile callback in
    place. ``builder.close()`` ends the workers at once; they end with this process
    anyway. Needs TVM.

    It also imports TVM's tensor intrinsics here, as MetaSchedule's ``TuneContext`` does
    for a CUDA target, but in 1-2 s instead of 17-20 s (2 cores; see
    :mod:`asynccomp.tvm._frames`): the tune that follows finds them imported.
    """
    builder = _builder_class()(
        max_workers=max_workers,
        timeout_sec=timeout_sec,
        f_build=f_build,
        f_export=f_export,
        initializer=initializer,
        max_uses=max_uses,
        max_rss_mib=max_rss_mib,
        memory_limit_mib=memory_limit_mib,
        idle_release=idle_release,
        start_timeout=start_timeout,
        register=register,
    )
    import_tensor_intrinsics()  # while the workers start
    return builder
