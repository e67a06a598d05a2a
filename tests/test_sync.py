"""SyncEngine: the blocking facade over the async engine, from many threads, across a
close and a fork."""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from typing import Any

import pytest

from asynccomp import CompileJob, CompileResult, Engine, EngineClosed, SyncEngine
from asynccomp.backends import compiler_versions
from asynccomp.cost import CostModel
from asynccomp.engine import CompletedResults

from .kernels import ARCH, broken_kernel, scale_kernel, slow_kernel
from .processes import compiler_processes


def test_sync_engine_methods() -> None:
    jobs = [CompileJob(scale_kernel(float(i)), name=f"s{i}") for i in range(4)]
    with SyncEngine(arch=ARCH, nvrtc_workers=2) as engine:
        assert engine.state.name == "RUNNING"
        single = engine.compile(jobs[0])
        many = engine.compile_many(jobs)
        with engine.as_completed(jobs) as results:
            done = sorted(r.job.name for r in results)
        stats = engine.statistics()
    assert engine.state.name == "CLOSED"
    assert single.ok
    assert [r.job for r in many] == jobs and all(r.ok for r in many)
    assert done == ["s0", "s1", "s2", "s3"]
    assert stats.completed == 9


def test_sync_engine_takes_engines_arguments() -> None:
    sync = inspect.signature(SyncEngine.__init__)
    assert list(sync.parameters) == list(inspect.signature(Engine.__init__).parameters)


def test_sync_engine_from_many_threads() -> None:
    with SyncEngine(arch=ARCH, nvrtc_workers=2) as engine, ThreadPoolExecutor(8) as pool:
        futures = [
            pool.submit(engine.compile, CompileJob(scale_kernel(float(i)), name=f"t{i}"))
            for i in range(12)
        ]
        results = [f.result() for f in futures]
    assert all(r.ok for r in results)


def test_closing_waits_for_the_compiles_of_other_threads() -> None:
    engine = SyncEngine(arch=ARCH, nvrtc_workers=2, cache=False)
    engine.start()
    results: list[CompileResult] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def caller(i: int) -> None:
        try:
            result = engine.compile(CompileJob(scale_kernel(100.0 + i), name=f"c{i}"))
        except BaseException as exc:  # what a caller sees, whatever it is
            with lock:
                errors.append(exc)
        else:
            with lock:
                results.append(result)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while engine.statistics().submitted < 20 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine.statistics().completed < 20  # closing while they compile
    engine.close()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(results) == 20 and all(r.ok for r in results)
    with pytest.raises(EngineClosed):
        engine.compile(CompileJob(scale_kernel()))
    assert compiler_processes() == []


def test_a_forked_child_gets_engine_closed_at_once() -> None:
    read, write = os.pipe()
    with SyncEngine(arch=ARCH) as engine:
        assert engine.compile(CompileJob(scale_kernel(5.0))).ok
        pid = os.fork()
        if pid == 0:  # the child: report what it saw, then leave without cleanup
            outcome = []
            for call in (lambda: engine.compile(CompileJob(scale_kernel(6.0))), engine.close):
                started = time.monotonic()
                try:
                    call()
                    outcome.append("no error")
                except EngineClosed as exc:
                    # A call that waited on the parent's loop would never return.
                    quick = time.monotonic() - started < 10
                    outcome.append(f"EngineClosed quick={quick} {exc}")
                except BaseException as exc:
                    outcome.append(repr(exc))
            os.write(write, "\n".join(outcome).encode())
            os._exit(0)
        os.close(write)
        deadline = time.monotonic() + 30
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                pytest.fail("the forked child hung")
            time.sleep(0.01)
        with os.fdopen(read) as report:
            lines = report.read().splitlines()
        # The parent's engine is untouched.
        assert engine.compile(CompileJob(scale_kernel(7.0))).ok
    assert len(lines) == 2, lines
    for line in lines:
        assert line.startswith("EngineClosed quick=True"), line
        assert "belongs to the parent process" in line


def test_sync_engine_inside_a_running_event_loop() -> None:
    async def caller() -> bool:
        # A caller whose own thread runs a loop (as in a notebook) must not deadlock.
        with SyncEngine(arch=ARCH) as engine:
            return engine.compile(CompileJob(broken_kernel())).ok

    assert asyncio.run(caller()) is False


def test_sync_engine_not_started() -> None:
    with pytest.raises(EngineClosed):
        SyncEngine(arch=ARCH).compile(CompileJob(scale_kernel()))


def test_leaving_as_completed_cancels_what_is_left() -> None:
    # One worker: the quick job first (the cost model is told the others are quicker), then
    # two compiles of ~15 s each. Leaving the block after the first result must cancel
    # them, not wait half a minute.
    jobs = [
        CompileJob(scale_kernel(11.0), name="quick"),
        CompileJob(slow_kernel(), name="slow1"),
        CompileJob(slow_kernel(30001), name="slow2"),
    ]
    model = CostModel()
    for job in jobs[1:]:
        model.observe("nvrtc", (ARCH,), job.source, 0.001)
    with SyncEngine(
        arch=ARCH, nvrtc_workers=1, nvrtc_mode="threads", cache=False, cost_model=model
    ) as engine:
        started = time.monotonic()
        with engine.as_completed(jobs) as results:
            first = next(iter(results))
        left = time.monotonic()
        stats = engine.statistics()
        assert engine.compile(CompileJob(scale_kernel(12.0))).ok  # the engine goes on
    assert first.job.name == "quick"
    assert left - started < 10
    assert stats.completed == 1 and stats.running == 0


def test_an_exception_leaving_the_block_cancels_prefetched_compiles() -> None:
    """The block's exception reaches the engine, as ``async with Engine`` would: the
    prefetched compile is cancelled, not waited for (it never completes)."""
    engine = SyncEngine(arch=ARCH, nvrtc_workers=1, cache=False)
    with pytest.raises(KeyError, match="the caller's own"), engine:
        engine.prefetch([CompileJob(slow_kernel(), name="slow")])
        wait_for(lambda: engine.statistics().running == 1)
        raise KeyError("the caller's own")
    stats = engine.engine.statistics()
    assert (stats.submitted, stats.completed, stats.running) == (1, 0, 0)


def test_sync_engine_mirrors_the_engines_methods() -> None:
    job = CompileJob(scale_kernel(13.0), name="m")
    with SyncEngine(arch=ARCH, nvrtc_workers=1) as engine:
        assert engine.estimate(job) >= 0
        assert engine.running() == []
        assert engine.toolkit.nvrtc_version is not None
        assert engine.cache is not None
        assert engine.compiler_versions == compiler_versions(engine.toolkit)
        assert engine.where == "in process"
    for name in ("running", "estimate", "toolkit", "cache", "compiler_versions", "where"):
        assert hasattr(SyncEngine, name), name


def test_close_from_another_thread_during_as_completed() -> None:
    """A close() from another thread after the iterating thread's first result (and
    before its next step): close() waits for the batch and returns; the iterating
    thread's next step raises EngineClosed, and the block's exit raises nothing else."""
    jobs = [CompileJob(scale_kernel(20.0 + i), name=f"c{i}") for i in range(4)]
    errors: list[BaseException] = []
    got: list[str] = []
    engine = SyncEngine(arch=ARCH, nvrtc_workers=1, cache=False)
    engine.start()
    first, closed = threading.Event(), threading.Event()

    def iterate() -> None:
        try:
            with engine.as_completed(jobs) as results:
                for result in results:
                    got.append(result.job.name)
                    first.set()
                    assert closed.wait(120)  # the next step comes after close() returned
        except BaseException as exc:
            errors.append(exc)
        finally:
            first.set()

    reader = threading.Thread(target=iterate)
    reader.start()
    assert first.wait(120)
    engine.close()
    closed.set()
    reader.join(60)
    assert not reader.is_alive()
    assert len(got) == 1 and [type(e) for e in errors] == [EngineClosed], (got, errors)
    assert engine.engine.statistics().completed == 4  # closing waited for the batch


class _Announcing(ExitStack):
    """An engine's exit stack that says when ``close()`` reaches it (the owner has
    let go of its portal by then)."""

    def __init__(self, inner: ExitStack, reached: threading.Event) -> None:
        super().__init__()
        self.inner, self.reached = inner, reached

    def close(self) -> None:
        self.reached.set()
        self.inner.close()


def test_a_close_while_as_completed_is_called_is_engine_closed() -> None:
    """close() from another thread lands between as_completed's call into the event
    loop and its return: EngineClosed (it was a bare AssertionError)."""
    engine = SyncEngine(arch=ARCH, nvrtc_workers=1, cache=False)
    engine.start()
    assert engine._stack is not None
    reached = threading.Event()
    engine._stack = _Announcing(engine._stack, reached)
    closer = threading.Thread(target=engine.close)
    make = engine.engine.as_completed

    def as_completed(jobs: Iterable[CompileJob]) -> CompletedResults:
        closer.start()  # in the event loop's thread: close() cannot finish before this
        assert reached.wait(60)
        return make(jobs)

    engine.engine.as_completed = as_completed  # type: ignore[method-assign]
    with pytest.raises(EngineClosed):
        engine.as_completed([CompileJob(scale_kernel(31.0))])
    closer.join(60)
    assert not closer.is_alive() and engine.state.name == "CLOSED"


def test_ctrl_c_in_a_blocking_call_cancels_its_compile() -> None:
    """KeyboardInterrupt while the main thread waits in compile(): the compile is
    cancelled in the event loop, as cancelling an ``await`` would be; it was left to
    run on, unseen, and closing waited for it."""
    main = threading.main_thread().ident
    assert main == threading.get_ident() and main is not None
    engine = SyncEngine(arch=ARCH, nvrtc_workers=1, nvrtc_mode="processes", cache=False)
    engine.start()

    def interrupt() -> None:
        wait_for(lambda: engine.statistics().running == 1)
        signal.pthread_kill(main, signal.SIGINT)

    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    interrupter = threading.Thread(target=interrupt)
    try:
        interrupter.start()
        with pytest.raises(KeyboardInterrupt):
            engine.compile(CompileJob(slow_kernel(), name="slow"))
    finally:
        interrupter.join(120)
        signal.signal(signal.SIGINT, saved)
    engine.close()  # a normal close: it waits for every call still running
    stats = engine.engine.statistics()
    assert (stats.submitted, stats.completed, stats.running) == (1, 0, 0)
    assert compiler_processes() == []


def test_ctrl_c_that_lands_as_the_call_is_scheduled_cancels_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A KeyboardInterrupt inside ``start_task_soon``, once the call is scheduled but
    before there is a future to cancel it by (on a loaded machine a Ctrl-C sent as the
    compile starts landed there, and the compile ran on to the end, unseen)."""
    engine = SyncEngine(arch=ARCH, nvrtc_workers=1, nvrtc_mode="processes", cache=False)
    engine.start()
    portal = engine._portal
    assert portal is not None
    schedule = portal.start_task_soon

    def scheduled_then_interrupted(*args: Any, **kwargs: Any) -> Any:
        schedule(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(portal, "start_task_soon", scheduled_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        engine.compile(CompileJob(slow_kernel(), name="slow"))
    monkeypatch.undo()
    engine.close()  # a normal close: it waits for every call still running
    stats = engine.engine.statistics()
    assert (stats.completed, stats.running) == (0, 0)
    assert compiler_processes() == []


def wait_for(check: Callable[[], bool], within: float = 120) -> None:
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline
        time.sleep(0.02)
