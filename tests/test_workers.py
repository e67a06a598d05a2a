"""asynccomp.workers.WorkerPool, the process kernel under NVRTC's workers, MetaSchedule's
builder and TileLang's lowering, on real worker processes: results that cannot travel,
cancellation, every wait bounded (a worker that hangs as it starts, stops mid-task or
stops idle), memory, idle release, threads sharing a pool, forked children, a pool that
stays usable after a failed batch, and both event loops anyio runs on. Tasks and
initializers are tests/warm_tasks.py's (by name: no cloudpickle here)."""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from asynccomp import TaskFailed, WorkerStartFailed
from asynccomp.workers import PoolSettings, TaskResult, WorkerPool

from . import warm_tasks
from .warm_tasks import claimed, wait_gone, within

STOPPED_LIMIT = 3.0  # the tests' own (the default is 10 s)


@pytest.fixture(scope="module")
def start() -> float:
    """A generous bound on a worker's start here (a bare one: no initializer), derived
    from one measured on this machine now."""
    began = time.monotonic()
    pool = WorkerPool(PoolSettings("probe", 1))
    try:
        assert pool.wait_ready(300)
    finally:
        pool.close()
    # At most 40 s: the longest test waits 5 of them, within pytest's timeout (300 s).
    return min(40.0, max(10.0, 20 * (time.monotonic() - began)))


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Path]:
    try:
        yield tmp_path
    finally:
        (tmp_path / "open").touch()  # whatever still hangs on the gate ends


def pool_of(size: int, **settings: object) -> WorkerPool:
    settings.setdefault("stopped_limit", STOPPED_LIMIT)
    return WorkerPool(PoolSettings("test", size, **settings))  # type: ignore[arg-type]


def _close(pool: WorkerPool, gate: Path | None = None, stopped: list[int] | None = None) -> None:
    """Unblock whatever a failed test left waiting, then close the pool."""
    if gate is not None:
        (gate / "open").touch()
    for each in stopped or []:
        try:
            os.kill(each, signal.SIGCONT)
        except ProcessLookupError:
            continue
    pool.close()


# -- what a task gives back -----------------------------------------------------------------


@pytest.mark.parametrize("fork", [True, False])
def test_workers_get_the_environment_their_pool_was_made_in(
    fork: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36: a template or worker starts on the pool's thread while the caller goes
    on (TileLang's import sets four variables meanwhile): workers get, and a shared
    template is named after, the environment as the pool was made. asynccomp's own
    variables are read as they are used, so a worker has them as they are now."""
    monkeypatch.delenv("PROBE", raising=False)
    monkeypatch.setenv("ASYNCCOMP_GONE", "removed after the pool was made")
    pool = pool_of(1, eager=False, fork=fork)  # nothing starts before the first task
    try:
        monkeypatch.setenv("PROBE", "set after the pool was made")
        monkeypatch.setenv("ASYNCCOMP_PROBE", "set after the pool was made")
        monkeypatch.delenv("ASYNCCOMP_GONE")
        names = [("PROBE",), ("ASYNCCOMP_PROBE",), ("ASYNCCOMP_GONE",)]
        probes = pool.map(warm_tasks.environ_of, names)
        assert [r.value for r in probes] == [None, "set after the pool was made", None]
        assert pool.statistics().forked == int(fork)
    finally:
        pool.close()


def test_a_result_that_does_not_pickle_is_its_tasks_typed_error() -> None:
    """N1: the worker survives its own result; the task says what did not travel."""
    pool = pool_of(1)
    try:
        [first, bad, after] = within(
            120,
            lambda: pool.map(
                warm_tasks.call, [(f,) for f in (os.getpid, warm_tasks.a_lock, os.getpid)]
            ),
            "map",
        )
        assert bad.outcome == "error" and isinstance(bad.value, TaskFailed)
        assert "cannot be sent back" in str(bad.value) and "pickle" in str(bad.value)
        assert bad.value.type_name == "TypeError" and "Traceback" in bad.traceback
        assert first.value == after.value == bad.pid  # the same worker serves on
        assert pool.statistics().crashed == 0
    finally:
        pool.close()


def test_exceptions_come_back_as_themselves_or_typed() -> None:
    pool = pool_of(1)
    try:
        own, unpicklable, exited = within(
            120,
            lambda: pool.map(
                warm_tasks.call,
                [
                    (warm_tasks.raise_value_error,),
                    (warm_tasks.raise_unpicklable,),
                    (warm_tasks.exit_task, 3),
                ],
            ),
            "map",
        )
        assert isinstance(own.value, ValueError) and str(own.value) == "a task's own error"
        assert "raise_value_error" in own.traceback
        assert isinstance(unpicklable.value, TaskFailed)
        assert unpicklable.value.type_name == "Unpicklable"
        assert "held a lock" in str(unpicklable.value)
        assert isinstance(exited.value, SystemExit)  # a task's exit does not end its worker
        assert own.pid == unpicklable.pid == exited.pid
    finally:
        pool.close()


def test_a_worker_that_dies_fails_its_task_naming_how(start: float) -> None:
    pool = pool_of(1)
    try:
        [died] = within(4 * start, lambda: pool.map(warm_tasks.die, [(7,)]), "map")
        assert died.outcome == "crashed" and "exited with status 7" in died.value
        [again] = pool.map(warm_tasks.pid, [()])
        assert again.outcome == "done" and again.value != died.pid
    finally:
        pool.close()


# -- cancellation ---------------------------------------------------------------------------


def test_a_cancelled_task_that_watches_its_cancel_keeps_its_worker(
    start: float, gate: Path
) -> None:
    pool = pool_of(1)
    try:
        handle = pool.submit(warm_tasks.stop_on_cancel, str(gate))
        worker = claimed(gate, start)
        handle.cancel()
        result = handle.result(timeout=start)
        assert result.outcome == "cancelled"
        assert pool.pids() == [worker]  # kept, warm
        assert pool.statistics().cancelled == 1
    finally:
        _close(pool, gate)


def test_a_cancelled_task_that_does_not_stop_is_killed_with_its_worker(
    start: float, gate: Path
) -> None:
    pool = pool_of(1, cancel_grace=0.2)
    try:
        handle = pool.submit(warm_tasks.first_task_hangs, str(gate))
        worker = claimed(gate, start)
        handle.cancel()
        assert handle.result(timeout=start).outcome == "cancelled"
        wait_gone([worker])
        [after] = pool.map(warm_tasks.pid, [()])
        assert after.outcome == "done" and after.value != worker
    finally:
        _close(pool, gate)


def test_a_queued_task_cancelled_never_runs(start: float, gate: Path) -> None:
    pool = pool_of(1)
    try:
        busy = pool.submit(warm_tasks.first_task_hangs, str(gate))
        queued = pool.submit(warm_tasks.pid)
        claimed(gate, start)
        queued.cancel()
        assert queued.result(timeout=start) == TaskResult("cancelled", None)
        (gate / "open").touch()
        assert busy.result(timeout=start).outcome == "done"
    finally:
        _close(pool, gate)


def test_a_queued_task_withdrawn_never_runs_and_a_running_one_stays(
    start: float, gate: Path
) -> None:
    """``withdraw()`` takes back a task no worker has yet (for a caller that can do it
    itself meanwhile), and leaves one a worker runs alone."""
    pool = pool_of(1)
    try:
        busy = pool.submit(warm_tasks.first_task_hangs, str(gate))
        queued = pool.submit(warm_tasks.pid)
        claimed(gate, start)
        assert pool.statistics().ready == 1
        assert not busy.withdraw()
        assert queued.withdraw()
        assert queued.result(timeout=start) == TaskResult("cancelled", None)
        assert not queued.withdraw()  # ended: nothing to take back
        (gate / "open").touch()
        assert busy.result(timeout=start).outcome == "done"
    finally:
        _close(pool, gate)


def test_a_failed_batch_cancels_its_own_tasks_and_the_pool_serves_on(
    start: float, gate: Path
) -> None:
    """N2: an exception out of ``map`` (here its callback's; Ctrl-C alike) ends that
    batch's tasks, and the pool is neither closed nor held."""
    pool = pool_of(2, cancel_grace=0.2)

    def on_result(index: int, result: TaskResult) -> None:
        raise KeyError("the caller's callback failed")

    try:
        tasks = [(warm_tasks.pid,), (warm_tasks.first_task_hangs, str(gate))]
        with pytest.raises(KeyError):
            within(4 * start, lambda: pool.map(warm_tasks.call, tasks, on_result), "map")
        hung = claimed(gate, start)
        wait_gone([hung])  # the batch's task still running was stopped
        results = within(4 * start, lambda: pool.map(warm_tasks.pid, [()] * 3), "map")
        assert [r.outcome for r in results] == ["done"] * 3
        assert not pool.closed
    finally:
        _close(pool, gate)


def test_a_ctrl_c_in_a_blocking_map_stops_its_tasks(start: float, gate: Path) -> None:
    """N2/N3: KeyboardInterrupt while ``map`` waits: its tasks are cancelled at once (a
    worker running one is killed), and the pool serves the next batch."""
    pool = pool_of(1, cancel_grace=0.2)
    # Ctrl-C raises KeyboardInterrupt here even where pytest was started with SIGINT
    # ignored (a background job of a script: Python then leaves it ignored)
    saved = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:

        def interrupt() -> None:
            claimed(gate, start)
            signal.raise_signal(signal.SIGINT)  # delivered to the main thread, in map

        threading.Thread(target=interrupt).start()
        began = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            pool.map(warm_tasks.first_task_hangs, [(str(gate),)] * 4)
        assert time.monotonic() - began < 4 * start
        wait_gone([int((gate / "claimed").read_text())])
        [after] = within(4 * start, lambda: pool.map(warm_tasks.pid, [()]), "map")
        assert after.outcome == "done"
    finally:
        signal.signal(signal.SIGINT, saved)
        _close(pool, gate)


# -- no lock held across a batch -------------------------------------------------------------


def test_two_threads_share_the_workers_task_by_task(start: float, gate: Path) -> None:
    """N5: one thread's batch holds nothing the other's needs: with two workers, a second
    thread's task runs while the first thread's task still runs, and statistics answer
    meanwhile."""
    pool = pool_of(2)
    try:
        assert pool.wait_ready(start)
        first = threading.Thread(
            target=pool.map, args=(warm_tasks.first_task_hangs, [(str(gate),)])
        )
        first.start()
        claimed(gate, start)
        [other] = within(start, lambda: pool.map(warm_tasks.pid, [()]), "second thread's map")
        assert other.outcome == "done"
        stats = within(5, pool.statistics, "statistics")
        assert stats.busy == 1
        (gate / "open").touch()
        first.join(start)
        assert not first.is_alive()
    finally:
        _close(pool, gate)


# -- every wait bounded ---------------------------------------------------------------------


def test_a_worker_hanging_as_it_starts_is_killed_and_replaced(start: float, gate: Path) -> None:
    """The first worker's initializer never returns: past ``start_timeout`` it is killed
    and its replacement, whose initializer returns, runs the task (spawned workers: the
    initializer runs in each)."""
    init = functools.partial(warm_tasks.first_start_hangs, str(gate))
    pool = pool_of(1, initializers=[init], start_timeout=start, fork=False)
    try:
        [result] = within(4 * start, lambda: pool.map(warm_tasks.pid, [()]), "map")
        first = claimed(gate, start)
        assert result.outcome == "done" and result.value != first
        assert pool.statistics().start_failed == 1
        wait_gone([first])
    finally:
        _close(pool, gate)


@pytest.mark.parametrize("fork", [True, False])
def test_workers_never_ready_are_a_typed_error(start: float, gate: Path, fork: bool) -> None:
    """Three starts in a row not ready within ``start_timeout``: the waiting tasks end
    ``start_failed`` with WorkerStartFailed, nothing is left, and the pool is usable."""
    timeout = start / 2
    init = functools.partial(warm_tasks.start_never_ready, str(gate))
    pool = pool_of(1, initializers=[init], start_timeout=timeout, fork=fork)
    try:
        [result] = within(10 * timeout, lambda: pool.map(warm_tasks.pid, [()]), "map")
        assert result.outcome == "start_failed"
        assert isinstance(result.value, WorkerStartFailed)
        assert "start_timeout" in str(result.value)
        started = [int(line) for line in (gate / "started").read_text().split()]
        assert len(started) == 3
        with pool._core.lock:  # given up: no template is started again (and again)
            assert not pool._core.primed and pool._core.template is None
        wait_gone(started)
        assert pool.pids() == [] and not pool.closed
    finally:
        _close(pool, gate)


def test_an_initializer_that_raises_is_a_typed_error_naming_it() -> None:
    pool = pool_of(1, initializers=[warm_tasks.raise_value_error])
    try:
        with pytest.raises(WorkerStartFailed, match="a task's own error"):
            within(120, pool.wait_ready, "wait_ready")
        [result] = within(120, lambda: pool.map(warm_tasks.pid, [()]), "map")
        assert result.outcome == "start_failed"
    finally:
        pool.close()


def test_a_task_past_its_timeout_is_killed_with_its_worker(start: float, gate: Path) -> None:
    pool = pool_of(1)
    try:
        assert pool.wait_ready(start)
        [worker] = pool.pids()
        [result] = within(
            4 * start,
            lambda: pool.map(warm_tasks.first_task_hangs, [(str(gate),)], timeout=0.5),
            "map",
        )
        assert result.outcome == "timeout"
        wait_gone([worker])
        assert pool.statistics().timed_out == 1
    finally:
        _close(pool, gate)


def test_a_stopped_busy_worker_is_lost_even_without_a_timeout(start: float, gate: Path) -> None:
    """SIGSTOP on the worker running a task, with no task timeout: after the stopped
    limit its task fails as crashed, the others succeed, and a replacement serves on."""
    pool = pool_of(2)
    victim = None
    try:
        assert pool.wait_ready(start)
        task = functools.partial(pool.map, warm_tasks.first_task_hangs, [(str(gate),)] * 3)

        def stop() -> None:
            nonlocal victim
            victim = claimed(gate, start)
            os.kill(victim, signal.SIGSTOP)

        stopper = threading.Thread(target=stop)
        stopper.start()
        results = within(STOPPED_LIMIT + 4 * start, task, "map")
        stopper.join()
        assert victim is not None
        assert [r.outcome for r in results].count("crashed") == 1
        assert victim not in {r.value for r in results if r.outcome == "done"}
        assert victim not in pool.pids() and pool.statistics().crashed == 1
        wait_gone([victim])
        assert [r.outcome for r in pool.map(warm_tasks.pid, [()] * 2)] == ["done", "done"]
    finally:
        _close(pool, gate, [] if victim is None else [victim])


def test_a_stopped_idle_worker_does_not_block_a_large_task(start: float) -> None:
    """A task larger than a pipe's buffer, sent to a worker stopped while idle: the
    pool's write never blocks, the worker never takes it, and another one runs it."""
    pool = pool_of(1)
    stopped: list[int] = []
    try:
        assert pool.wait_ready(start)
        stopped = pool.pids()
        os.kill(stopped[0], signal.SIGSTOP)
        data = b"x" * (4 << 20)
        [result] = within(4 * start, lambda: pool.map(warm_tasks.size, [(data,)]), "map")
        assert (result.outcome, result.value) == ("done", len(data))
        assert result.pid not in stopped
        wait_gone(stopped)
    finally:
        _close(pool, stopped=stopped)


def test_close_ends_a_stopped_worker(start: float) -> None:
    pool = pool_of(2)
    pids: list[int] = []
    try:
        assert pool.wait_ready(start)
        pids = pool.pids()
        os.kill(pids[0], signal.SIGSTOP)
        within(start, pool.close, "close")
        wait_gone(pids)
    finally:
        _close(pool, stopped=pids)


# -- memory ---------------------------------------------------------------------------------


def _baseline(start: float) -> int:
    probe = pool_of(1)
    try:
        assert probe.wait_ready(start)
        [first] = probe.pids()
        return int(psutil.Process(first).memory_info().rss)
    finally:
        probe.close()


def test_a_worker_past_the_memory_ceiling_is_recycled(start: float) -> None:
    pool = pool_of(1, max_rss=_baseline(start) + (64 << 20))
    try:
        small = pool.map(warm_tasks.pid, [()] * 3)
        [first] = {result.value for result in small}  # under the ceiling: kept
        assert pool.pids() == [first] and pool.statistics().recycled == 0
        [big] = pool.map(warm_tasks.hold, [(128,)])
        assert (big.outcome, big.value) == ("done", first)
        assert pool.statistics().recycled == 1
        wait_gone([first])
        later = pool.map(warm_tasks.pid, [()] * 2)
        assert [r.outcome for r in later] == ["done", "done"]
        assert first not in {r.value for r in later}
    finally:
        pool.close()


def test_a_task_past_the_memory_limit_is_killed_while_it_runs(start: float, gate: Path) -> None:
    """The limit holds while a task runs (read every second), not only between tasks:
    a task that allocates past it and keeps running ends ``memory``, its worker killed."""
    pool = pool_of(1, memory_limit=_baseline(start) + (64 << 20))
    try:
        handle = pool.submit(warm_tasks.hold_then_wait, 256, str(gate))
        result = handle.result(timeout=4 * start)
        assert result.outcome == "memory" and "memory_limit" in result.value
        assert pool.statistics().over_memory == 1
        assert result.pid is not None
        wait_gone([result.pid])
        [after] = pool.map(warm_tasks.pid, [()])
        assert after.outcome == "done"
    finally:
        _close(pool, gate)


# -- idle release ---------------------------------------------------------------------------


def test_a_pool_never_used_releases_its_workers(start: float) -> None:
    pool = pool_of(1, idle_release=0.5)
    try:
        assert pool.wait_ready(start)
        first = pool.pids()
        deadline = time.monotonic() + 2 * start
        while pool.pids():
            assert time.monotonic() < deadline, "a pool never used kept its workers"
            time.sleep(0.05)
        wait_gone(first)
        assert pool.statistics().released == 1 and not pool.statistics().template
        [result] = pool.map(warm_tasks.pid, [()])  # they come back
        assert result.outcome == "done" and result.value not in first
    finally:
        pool.close()


# -- where workers come from -----------------------------------------------------------------


def test_workers_are_forked_from_one_warm_template(start: float) -> None:
    """The initializers run once, in the template; each worker is forked from it (a
    child of the template, not of this process) and runs them no more."""
    pool = pool_of(2)
    try:
        assert pool.wait_ready(start)
        stats = pool.statistics()
        assert stats.forked == stats.started == 2 and stats.template
        parents = {psutil.Process(pid).ppid() for pid in pool.pids()}
        assert len(parents) == 1 and os.getpid() not in parents
        assert psutil.Process(parents.pop()).name() == "acz-test"
        assert {psutil.Process(pid).name() for pid in pool.pids()} == {"acw-test"}
    finally:
        pool.close()


def test_a_template_that_imports_numpy_is_still_forked_from(start: float) -> None:
    """numpy's OpenBLAS starts a thread pool as it is imported (TVM and TileLang import
    numpy): the template runs BLAS one thread, so it stays one thread, and forkable."""
    pytest.importorskip("numpy")
    pool = pool_of(2, initializers=[warm_tasks.import_numpy])
    try:
        assert pool.wait_ready(4 * start)
        stats = pool.statistics()
        assert stats.forked == stats.started == 2 and stats.template
    finally:
        pool.close()


def test_a_template_with_threads_is_not_forked_from(
    start: float, caplog: pytest.LogCaptureFixture
) -> None:
    """An initializer that leaves a thread running makes a fork unsafe: the workers are
    spawned instead, each running the initializers itself, and a warning says why, with
    the template's threads (on a GPU machine, CUDA's driver's) and the first initializer
    after which they were there (what to change)."""
    caplog.set_level(logging.WARNING, "asynccomp.workers")
    first = functools.partial(warm_tasks.remember, "before")
    pool = pool_of(1, initializers=[first, warm_tasks.start_a_thread, warm_tasks.pid])
    try:
        [result] = within(4 * start, lambda: pool.map(warm_tasks.threads_alive, [()]), "map")
        assert result.outcome == "done" and result.value >= 2  # it ran in the worker
        assert pool.statistics().forked == 0 and not pool.statistics().template
        assert psutil.Process(result.pid).ppid() == os.getpid()
    finally:
        pool.close()
    [warning] = [r.getMessage() for r in caplog.records if "no fork is safe" in r.getMessage()]
    assert "the test template has threads" in warning
    threads = warning.split("initializers (")[1].split(";")[0].split(", ")
    assert len(threads) == 2, warning  # the main thread and the initializer's
    assert "the first after tests.warm_tasks.start_a_thread)" in warning


@pytest.mark.parametrize("set_by_user", [None, "0"])
def test_a_template_keeps_cuda_uninitialized_unless_told(
    start: float, monkeypatch: pytest.MonkeyPatch, set_by_user: str | None
) -> None:
    """A template (and the workers forked from it) asks torch for CUDA through NVML, which
    does not start CUDA's driver and its threads (TileLang's import asks
    ``torch.cuda.is_available()``); a value the user set is kept."""
    if set_by_user is None:
        monkeypatch.delenv("PYTORCH_NVML_BASED_CUDA_CHECK", raising=False)
    else:
        monkeypatch.setenv("PYTORCH_NVML_BASED_CUDA_CHECK", set_by_user)
    pool = pool_of(1)
    try:
        [result] = within(
            4 * start,
            lambda: pool.map(warm_tasks.environ_of, [("PYTORCH_NVML_BASED_CUDA_CHECK",)]),
            "map",
        )
        assert pool.statistics().forked == 1
    finally:
        pool.close()
    assert result.value == (set_by_user or "1")


def test_workers_run_the_pools_asynccomp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A worker imports the ``asynccomp`` its pool runs, whatever ``PYTHONPATH`` and the
    working folder say (a checkout found through ``sys.path`` beside an installed copy)."""
    import asynccomp

    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.chdir(tmp_path)
    pool = pool_of(1)
    try:
        [result] = within(120, lambda: pool.map(warm_tasks.asynccomp_file, [()]), "map")
    finally:
        pool.close()
    assert result.value == asynccomp.__file__


def test_each_result_is_reported_as_its_task_ends(gate: Path) -> None:
    """``map(..., on_result=f)`` calls ``f`` as each task ends, in this thread: the
    second task here waits for the gate that the first one's report opens."""
    pool = pool_of(1)
    reported: list[tuple[int, str]] = []

    def on_result(index: int, result: TaskResult) -> None:
        reported.append((index, result.outcome))
        (gate / "open").touch()

    try:
        results = within(
            120,
            lambda: pool.map(
                warm_tasks.call, [(warm_tasks.pid,), (warm_tasks.wait_open, str(gate))], on_result
            ),
            "map",
        )
    finally:
        _close(pool, gate)
    assert results[0].value != os.getpid() and results[1].value is True
    assert reported == [(0, "done"), (1, "done")]


# -- forked children of the pool's process --------------------------------------------------


CHILD = """
import os, sys
sys.path.insert(0, {repo!r})
from asynccomp.workers import PoolSettings, WorkerPool
from tests import warm_tasks

pool = WorkerPool(PoolSettings("fork", 1))
[parent] = pool.map(warm_tasks.pid, [()])
child = os.fork()
if child == 0:  # the child: its own workers, never the parent's answers
    [mine] = pool.map(warm_tasks.pid, [()])
    print("child", mine.outcome, mine.value != parent.value, flush=True)
    sys.exit(0)  # a normal exit: the parent's workers must live on
os.waitpid(child, 0)
[again] = pool.map(warm_tasks.pid, [()])
print("parent", again.outcome, again.value == parent.value, flush=True)
pool.close()
"""


def test_a_forked_child_neither_takes_nor_ends_its_parents_workers() -> None:
    import subprocess

    repo = str(Path(__file__).resolve().parent.parent)
    done = subprocess.run(
        [sys.executable, "-c", CHILD.format(repo=repo)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["child done True", "parent done True"], done.stdout


# -- both event loops ------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_run_on_either_loop_and_cancel(backend: str, gate: Path) -> None:
    """``await pool.run(...)`` on asyncio and trio: a result, and a cancel that stops the
    task in its worker and keeps it."""
    pool = pool_of(1)

    async def main() -> tuple[TaskResult, bool]:
        result = await pool.run(warm_tasks.pid)
        with anyio.move_on_after(60):
            async with anyio.create_task_group() as tg:

                async def stop_when_running() -> None:
                    await anyio.to_thread.run_sync(claimed, gate, 60.0)
                    tg.cancel_scope.cancel()

                tg.start_soon(stop_when_running)
                await pool.run(warm_tasks.stop_on_cancel, str(gate))
        return result, result.pid in pool.pids()

    try:
        result, kept = anyio.run(main, backend=backend)
        assert result.outcome == "done" and kept
    finally:
        _close(pool, gate)


# -- TileLang's lowering pool (no TileLang needed: its tasks are stood in for) ---------------


def test_the_lowering_pool_is_replaced_not_handed_out_closed() -> None:
    """N2: after a failed batch closed it (or ``shutdown()``), the next autotune of the
    process gets a fresh pool, not a closed one that lowers nothing."""
    from asynccomp.tilelang import _pool

    first = _pool.pool(1)
    try:
        first.close()
        second = _pool.pool(1)
        assert second is not first and not second.closed
        assert _pool.pool(1) is second  # kept while it is open
    finally:
        _pool.close()


def test_a_lowering_batch_shut_down_early_stops_its_configs(
    start: float, gate: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """N3: a batch shut down before its configs are lowered (Ctrl-C in ``par_compile``
    or TileLang's loop) cancels them in their workers and returns at once, instead of
    waiting for every config; the pool serves the next batch."""
    from asynccomp.tilelang import _pool

    monkeypatch.setattr(_pool, "_lower", warm_tasks.lowering_hangs)
    workers = pool_of(2, cancel_grace=0.2)
    finished: list[object] = []
    recipe: Any = str(gate)  # the stand-in task's argument, in place of a packed recipe
    units = [_pool.Unit([recipe], finished.append) for _ in range(4)]
    try:
        # Ready first: a batch that comes before any worker is lowers units here.
        assert workers.wait_ready(4 * start)
        batch = _pool.Batch(workers, units, finishers=1)
        claimed(gate, start)
        deadline = time.monotonic() + start
        while workers.statistics().busy < 2:  # two configs lowering, two waiting
            assert time.monotonic() < deadline, "the configs did not start"
            time.sleep(0.05)
        hung = workers.pids()
        began = time.monotonic()
        batch.shutdown(wait=False)
        assert time.monotonic() - began < start
        wait_gone(hung)  # both running configs were stopped in their workers
        assert all(f.cancelled() for f in batch.futures)
        assert not finished  # no unit was finished after the shutdown
        [after] = within(4 * start, lambda: workers.map(warm_tasks.pid, [()]), "map")
        assert after.outcome == "done"
    finally:
        _close(workers, gate)


def test_a_lowering_batch_lowers_here_while_the_workers_start(
    start: float, gate: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 36: a batch that comes while the template is still starting (importing
    TileLang, at a process's first autotune) does not wait idle: this process takes
    units back from the end of the queue, LOWER_HERE at a time, and lowers them itself,
    silently (no "lowering in this process" warning: nothing went wrong)."""
    from asynccomp.tilelang import _pool

    never_ready = functools.partial(warm_tasks.wait_open, str(gate))
    workers = pool_of(2, initializers=[never_ready], start_timeout=10 * start)
    finished: list[tuple[int, list[object]]] = []
    lock = threading.Lock()

    def finish(u: int, outcomes: list[object]) -> int:
        with lock:
            finished.append((u, outcomes))
        return u

    recipe: Any = "recipe"  # never sent: no worker is ready to take it
    units = [_pool.Unit([recipe], functools.partial(finish, u)) for u in range(5)]
    try:
        with caplog.at_level(logging.WARNING, logger="asynccomp.tilelang"):
            batch = _pool.Batch(workers, units, finishers=4)
            done, _ = concurrent.futures.wait(batch.futures, timeout=4 * start)
            assert len(done) == 5, "the units were not lowered here while no worker was ready"
            batch.shutdown()
        assert [f.result() for f in batch.futures] == list(range(5))
        assert workers.statistics().ready == 0  # no worker had started all along
        for _, outcomes in finished:
            assert outcomes == [_pool.Unavailable("lowered here while the workers start", True)]
        # From the end of the queue (the workers take from the front), two at a time.
        assert {u for u, _ in finished[:2]} == {4, 3}
        assert not caplog.records
    finally:
        _close(workers, gate)


def test_a_lowering_batch_leaves_everything_to_ready_workers(
    start: float, gate: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asynccomp.tilelang import _pool

    monkeypatch.setattr(_pool, "_lower", warm_tasks.lowering_hangs)
    (gate / "open").touch()  # the stand-in lowering returns its worker's pid at once
    workers = pool_of(1)
    try:
        assert workers.wait_ready(4 * start)
        recipe: Any = str(gate)  # the stand-in task's argument, in place of a packed recipe
        batch = _pool.Batch(workers, [_pool.Unit([recipe], list) for _ in range(4)], 2)
        done, _ = concurrent.futures.wait(batch.futures, timeout=4 * start)
        batch.shutdown()
        assert len(done) == 4
        assert all(f.result() == workers.pids() for f in batch.futures)  # a worker's each
    finally:
        _close(workers, gate)


# -- the MetaSchedule builder's pool, without TVM ------------------------------------------


def test_the_builder_without_apache_tvm_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No TVM, or another one (TileLang ships its own ``tvm``, without MetaSchedule's
    builder API): an ImportError naming what to install, not a bare missing module."""
    import asynccomp.tvm
    from asynccomp.tvm import _ms_builder

    monkeypatch.setitem(sys.modules, "tvm.ir.utils", None)  # its import raises ImportError
    _ms_builder._builder_class.cache_clear()
    try:
        with pytest.raises(ImportError, match=r"pip install 'apache-tvm==0\.27\.0\.post1'"):
            asynccomp.tvm.Builder(max_workers=1)
    finally:
        _ms_builder._builder_class.cache_clear()


def test_nvrtc_workers_outlive_the_thread_that_started_them_on_trio(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """N4: on trio, processes were started from a cached thread that ends after a while
    idle, and ``PR_SET_PDEATHSIG`` (which fires when that *thread* ends) killed the NVRTC
    workers: the next compile paid a cold start. Workers now watch their owner's process.
    Here trio's thread cache lets its threads go after 0.2 s instead of 10 s."""
    import trio._core._thread_cache as thread_cache

    from asynccomp import CompileJob, Engine

    from .kernels import ARCH, scale_kernel
    from .processes import nvrtc_workers, wait_until

    monkeypatch.setattr(thread_cache, "IDLE_TIMEOUT", 3.0)

    async def main() -> tuple[list[int], list[int], bool]:
        async with Engine(arch=ARCH, nvrtc_workers=1, nvrtc_mode="processes", cache=False) as e:
            assert (await e.compile(CompileJob(scale_kernel(1.0), name="a"))).ok
            first = nvrtc_workers()
            # Every thread trio started for the engine has idled out and ended.
            await wait_until(
                lambda: not any(t.name.startswith("Trio thread") for t in threading.enumerate())
            )
            await anyio.sleep(0.5)  # what a parent-death signal would take to land
            again = await e.compile(CompileJob(scale_kernel(2.0), name="b"))
            return first, nvrtc_workers(), again.ok

    first, after, ok = anyio.run(main, backend="trio")
    assert ok and len(first) == 1
    assert after == first  # the same warm worker, alive


def test_no_module_of_the_worker_kernel_passes_450_lines() -> None:
    """Issue 35's bound on the kernel's modules (small modules whose names say what
    they hold): one that grows past it is split, not stretched."""
    folder = Path(__file__).resolve().parent.parent / "asynccomp" / "workers"
    sizes = {p.name: len(p.read_text().splitlines()) for p in folder.glob("*.py")}
    assert len(sizes) >= 10
    assert {name: n for name, n in sizes.items() if n > 450} == {}
