"""asynccomp._warm_pool.WarmPool (asynccomp.tvm.Builder's workers) on real worker
processes, without TVM: every wait bounded (a worker that hangs as it starts, stops
mid-task or stops idle), and the memory ceiling. Tasks and initializers are
tests/warm_tasks.py's (by name: no cloudpickle here)."""

from __future__ import annotations

import functools
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from asynccomp._warm_pool import STOPPED_LIMIT, TaskResult, WarmPool
from asynccomp.errors import WorkerStartFailed

from . import warm_tasks
from .warm_tasks import claimed, gone, wait_gone, within


@pytest.fixture(scope="module")
def start() -> float:
    """A generous bound on a worker's start here (a bare one: no initializer), derived
    from one measured on this machine now."""
    began = time.monotonic()
    pool = WarmPool(1)
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


def _close(pool: WarmPool, gate: Path | None = None, stopped: list[int] | None = None) -> None:
    """Unblock whatever a failed test left waiting (a map holds the pool's lock), then
    close the pool."""
    if gate is not None:
        (gate / "open").touch()
    _resume(stopped or [])
    pool.close()


def _resume(pids: list[int]) -> None:
    for each in pids:
        try:
            os.kill(each, signal.SIGCONT)
        except ProcessLookupError:
            continue


def test_a_worker_hanging_as_it_starts_is_killed_and_replaced(start: float, gate: Path) -> None:
    """The first worker's initializer never returns: past ``start_timeout`` it is killed
    and its replacement, whose initializer returns, runs the task."""
    pool = WarmPool(
        1, [functools.partial(warm_tasks.first_start_hangs, str(gate))], start_timeout=start
    )
    try:
        first = pool.pids()
        [result] = within(4 * start, lambda: pool.map(warm_tasks.pid, [()]), "map")
        assert result.outcome == "done" and result.value not in first
        assert claimed(gate, start) == first[0]
        assert pool.statistics().start_timed_out == 1
        assert gone(first)
    finally:
        _close(pool, gate)


def test_workers_never_ready_are_a_typed_error(start: float, gate: Path) -> None:
    """Three workers in a row not ready within ``start_timeout``: WorkerStartFailed, and
    none of them is left."""
    timeout = start / 2
    pool = WarmPool(
        1, [functools.partial(warm_tasks.start_never_ready, str(gate))], start_timeout=timeout
    )
    try:
        with pytest.raises(WorkerStartFailed, match="start_timeout"):
            within(10 * timeout, lambda: pool.map(warm_tasks.pid, [()]), "map")
        assert pool.pids() == []
        started = [int(line) for line in (gate / "started").read_text().split()]
        assert len(started) == 3
        wait_gone(started)
    finally:
        _close(pool, gate)


def test_wait_ready_is_bounded_by_the_start_timeout(start: float, gate: Path) -> None:
    pool = WarmPool(
        1, [functools.partial(warm_tasks.start_never_ready, str(gate))], start_timeout=start / 2
    )
    try:
        with pytest.raises(WorkerStartFailed):
            within(5 * start, pool.wait_ready, "wait_ready")
        assert pool.pids() == []
    finally:
        _close(pool, gate)


def test_a_worker_past_the_memory_ceiling_is_recycled(start: float) -> None:
    probe = WarmPool(1)
    try:
        assert probe.wait_ready(start)
        [first] = probe.pids()
        baseline = psutil.Process(first).memory_info().rss
    finally:
        probe.close()
    ceiling = baseline + (64 << 20)
    pool = WarmPool(1, max_rss=ceiling)
    try:
        small = pool.map(warm_tasks.pid, [()] * 3)
        [first] = {result.value for result in small}  # under the ceiling: kept
        assert pool.pids() == [first] and pool.statistics().recycled == 0
        [big] = pool.map(warm_tasks.hold, [(128,)])
        assert (big.outcome, big.value) == ("done", first)
        assert pool.statistics().recycled == 1
        assert first not in pool.pids()
        wait_gone([first])
        later = pool.map(warm_tasks.pid, [()] * 2)
        assert [r.outcome for r in later] == ["done", "done"]
        assert first not in {r.value for r in later}
    finally:
        pool.close()


def test_a_stopped_busy_worker_is_lost_even_without_a_timeout(start: float, gate: Path) -> None:
    """SIGSTOP on the worker running a task, with no task timeout: after STOPPED_LIMIT its
    task fails as crashed, the others succeed, and a replacement serves on."""
    pool = WarmPool(2)
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
    pool's write never blocks, so the task's timeout still ends it."""
    pool = WarmPool(1, timeout=STOPPED_LIMIT / 2)
    stopped = []
    try:
        assert pool.wait_ready(start)
        stopped = pool.pids()
        os.kill(stopped[0], signal.SIGSTOP)
        data = b"x" * (4 << 20)
        [result] = within(
            STOPPED_LIMIT + 2 * start, lambda: pool.map(warm_tasks.size, [(data,)]), "map"
        )
        assert result.outcome == "timeout"
        wait_gone(stopped)
        [again] = pool.map(warm_tasks.size, [(data,)])
        assert (again.outcome, again.value) == ("done", len(data))
    finally:
        _close(pool, stopped=stopped)


def test_close_ends_a_stopped_worker(start: float) -> None:
    pool = WarmPool(2)
    pids: list[int] = []
    try:
        assert pool.wait_ready(start)
        pids = pool.pids()
        os.kill(pids[0], signal.SIGSTOP)
        within(start, pool.close, "close")
        wait_gone(pids)
    finally:
        _close(pool, stopped=pids)


def test_a_pool_never_used_releases_its_workers(start: float) -> None:
    pool = WarmPool(1, idle_release=0.5)
    try:
        first = pool.pids()
        deadline = time.monotonic() + 2 * start
        while pool.pids():
            assert time.monotonic() < deadline, "a pool never used kept its workers"
            time.sleep(0.05)
        wait_gone(first)
        assert pool.statistics().released == 1
        [result] = pool.map(warm_tasks.pid, [()])  # they come back
        assert result.outcome == "done" and result.value not in first
    finally:
        pool.close()


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
        with pytest.raises(ImportError, match=r"pip install 'asynccomp\[tvm\]'"):
            asynccomp.tvm.Builder(max_workers=1)
    finally:
        _ms_builder._builder_class.cache_clear()


def test_each_result_is_reported_as_its_task_ends(gate: Path) -> None:
    """``map(..., on_result=f)`` calls ``f`` as each task ends, in this thread: the
    second task here waits for the gate that the first one's report opens."""
    pool = WarmPool(1)
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


def test_workers_run_the_pools_asynccomp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A worker imports the ``asynccomp`` its pool runs, whatever ``PYTHONPATH`` and the
    working folder say (a checkout found through ``sys.path`` beside an installed copy)."""
    import asynccomp

    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.chdir(tmp_path)
    pool = WarmPool(1)
    try:
        [result] = within(120, lambda: pool.map(warm_tasks.asynccomp_file, [()]), "map")
    finally:
        pool.close()
    assert result.value == asynccomp.__file__
