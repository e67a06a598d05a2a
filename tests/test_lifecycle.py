"""The engine's lifecycle, on a backend that compiles nothing (tests/fakes.py): states,
closing (waiting for callers, or ending them with EngineClosed), as_completed's block,
checkpoints, and what queued jobs cost. Each step waits for what it needs to have
happened (a job started, the close begun, jobs queued), not for a while."""

from __future__ import annotations

import asyncio
import time

import anyio
import anyio.lowlevel
import pytest

from asynccomp import CompileJob, EngineClosed, InvalidJob

from .fakes import FakeEngine, fake_job
from .kernels import ARCH
from .processes import wait_until


async def test_states_and_calls_outside_running_raise_engine_closed() -> None:
    engine = FakeEngine(arch=ARCH)
    assert engine.state.name == "NEW"
    with pytest.raises(EngineClosed, match="not running"):
        await engine.compile(fake_job("ok"))
    with pytest.raises(EngineClosed):
        engine.prefetch([fake_job("ok")])
    async with engine:
        assert engine.state.name == "RUNNING"
        assert (await engine.compile(fake_job("ok"))).ok
        with pytest.raises(InvalidJob):
            await engine.compile("not a job")  # type: ignore[arg-type]
    assert engine.state.name == "CLOSED"
    assert engine.fake.closed
    with pytest.raises(EngineClosed, match="closed"):
        await engine.compile_many([fake_job("ok")])
    with pytest.raises(EngineClosed, match="starts once"):
        async with engine:
            pass


async def test_closing_waits_for_callers_in_other_tasks_and_refuses_new_calls() -> None:
    results = []
    refused: list[Exception] = []
    async with anyio.create_task_group() as tg:
        async with FakeEngine(arch=ARCH, nvrtc_workers=2) as engine:

            async def caller(i: int) -> None:
                results.append(await engine.compile(fake_job("block", f"c{i}")))

            for i in range(4):
                tg.start_soon(caller, i)
            # All four callers are in compile(): two compile, two wait for a slot.
            await engine.fake.wait_started(count=2)
            await wait_until(lambda: engine.statistics().queued == 2)

            async def latecomer() -> None:
                await engine.closing.wait()
                assert engine.state.name == "CLOSING"
                try:
                    await engine.compile(fake_job("ok", "late"))
                except EngineClosed as exc:
                    refused.append(exc)
                # Only now may the callers' compiles end: the close has to wait for them.
                assert results == []
                engine.fake.release_all()

            tg.start_soon(latecomer)
        # Leaving the block waited for all four: none lost its result.
        assert engine.state.name == "CLOSED"
        assert sorted(r.job.name for r in results) == ["c0", "c1", "c2", "c3"]
        assert all(r.ok for r in results)
    assert len(refused) == 1 and "closing" in str(refused[0])


async def test_a_cancelled_close_ends_each_unfinished_call_with_engine_closed() -> None:
    outcomes: list[object] = []
    engine = FakeEngine(arch=ARCH, nvrtc_workers=4)
    async with anyio.create_task_group() as tg:

        async def caller(i: int) -> None:
            try:
                outcomes.append(await engine.compile_many([fake_job("block", f"b{i}")]))
            except BaseException as exc:  # what the caller sees, whatever it is
                outcomes.append(exc)

        with anyio.CancelScope() as closing_task:
            async with engine:
                for i in range(3):
                    tg.start_soon(caller, i)
                await engine.fake.wait_started("b0", "b1", "b2")

                async def give_up_waiting() -> None:
                    await engine.closing.wait()
                    closing_task.cancel()  # the closing task stops waiting for the calls

                tg.start_soon(give_up_waiting)
    assert closing_task.cancelled_caught
    assert engine.state.name == "CLOSED"
    assert len(outcomes) == 3
    assert all(type(o) is EngineClosed for o in outcomes), outcomes
    assert sorted(engine.fake.cancelled) == ["b0", "b1", "b2"]


async def test_an_exception_in_the_block_propagates_as_it_is() -> None:
    with pytest.raises(KeyError, match="mine"):
        async with FakeEngine(arch=ARCH) as engine:
            engine.prefetch([fake_job("block", "pending")])
            await engine.fake.wait_started("pending")
            raise KeyError("mine")
    assert engine.fake.cancelled == ["pending"]


async def test_leaving_as_completed_cancels_the_rest_at_once() -> None:
    jobs = [fake_job("ok", "quick"), *(fake_job("block", f"stuck{i}") for i in range(3))]
    async with FakeEngine(arch=ARCH, nvrtc_workers=4) as engine:
        seen = []
        async with engine.as_completed(jobs) as results:
            async for result in results:
                seen.append(result.job.name)
                break
        # The block is left: the three blocked compiles were cancelled, not waited for.
        assert seen == ["quick"]
        assert sorted(engine.fake.cancelled) == ["stuck0", "stuck1", "stuck2"]
        assert engine.statistics().running == 0
        started = time.monotonic()
    # Nothing left for the close to wait for: the blocked compiles would block forever,
    # so any bound tells (a generous one: the machine may be loaded).
    assert time.monotonic() - started < 10.0


class _Mine(Exception):
    pass


async def test_an_exception_inside_as_completed_propagates_as_it_is() -> None:
    async with FakeEngine(arch=ARCH) as engine:
        with pytest.raises(_Mine):
            async with engine.as_completed([fake_job("block", "x")]):
                await engine.fake.wait_started("x")
                raise _Mine
        assert engine.fake.cancelled == ["x"]
        with pytest.raises(_Mine):
            async with engine.as_completed([fake_job("ok", "y")]) as results:
                async for _ in results:
                    raise _Mine
        assert engine.statistics().completed == 1


async def test_as_completed_is_a_block_not_a_bare_iterator() -> None:
    async with FakeEngine(arch=ARCH) as engine:
        with pytest.raises(TypeError):
            async for _ in engine.as_completed([fake_job("ok")]):  # type: ignore[attr-defined]
                pass  # pragma: no cover


async def test_cached_compiles_checkpoint() -> None:
    job = fake_job("ok", "hot")
    async with FakeEngine(arch=ARCH, cache_dir=False) as engine:
        assert not (await engine.compile(job)).cached
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            await anyio.lowlevel.checkpoint()
            before = ticks
            for _ in range(200):
                assert (await engine.compile(job)).cached
            assert ticks - before >= 100  # the other task ran all along
            tg.cancel_scope.cancel()
        # A cancelled caller is stopped even when the answer is in memory.
        with anyio.CancelScope() as scope:
            scope.cancel()
            await engine.compile(job)
            pytest.fail("a cache hit ignored its cancellation")  # pragma: no cover
        assert scope.cancelled_caught
        with anyio.CancelScope() as scope:
            scope.cancel()
            await engine.compile_many([])
        assert scope.cancelled_caught


@pytest.mark.asyncio_only  # counts asyncio's tasks
async def test_queued_jobs_are_not_tasks() -> None:
    jobs = [fake_job("ok", f"q{i}") for i in range(2000)]
    async with FakeEngine(arch=ARCH, nvrtc_workers=1, cache=False) as engine:
        engine.prefetch([fake_job("block", "first")])
        await engine.fake.wait_started("first")
        engine.prefetch(jobs)
        await wait_until(lambda: engine.statistics().queued == 2000)
        # A parked task per queued job is what made 10,000 queued jobs cost ~90 MB.
        assert len(asyncio.all_tasks()) < 20
        engine.fake.release_all()
    assert engine.statistics().completed == 2001


async def test_prefetch_cancel_and_follower_takes_over() -> None:
    # A caller waiting for a prefetched compile (same job) compiles it itself when the
    # prefetch is cancelled.
    job = fake_job("block", "shared")
    async with FakeEngine(arch=ARCH, cache_dir=False) as engine:
        engine.prefetch([job])
        await engine.fake.wait_started("shared")
        async with anyio.create_task_group() as tg:
            results = []

            async def wait_for_it() -> None:
                results.append(await engine.compile(job))

            tg.start_soon(wait_for_it)
            await wait_until(lambda: engine.statistics().submitted == 2)  # it waits too
            assert engine.statistics().running == 1  # one compile for both
            engine.cancel_prefetched()
            await engine.fake.wait_started("shared", count=2)  # the caller's own compile
            engine.fake.release("shared")
        stats = engine.statistics()
    assert results[0].ok and not results[0].cached
    assert engine.fake.cancelled == ["shared"]
    assert engine.fake.started == ["shared", "shared"]
    assert stats.deduplicated == 0


async def test_jobs_cancelled_while_queued_give_their_place_away() -> None:
    async with FakeEngine(arch=ARCH, nvrtc_workers=1, cache=False) as engine:
        engine.prefetch([fake_job("block", "running")])
        await engine.fake.wait_started("running")
        with anyio.CancelScope() as queued:
            async with anyio.create_task_group() as tg:

                async def cancel_them_once_queued() -> None:
                    await wait_until(lambda: engine.statistics().queued == 5)
                    queued.cancel()

                tg.start_soon(cancel_them_once_queued)
                await engine.compile_many([fake_job("ok", f"gone{i}") for i in range(5)])
        assert queued.cancelled_caught
        assert engine.statistics().queued == 0
        engine.fake.release("running")
        after = await engine.compile(fake_job("ok", "after"))
    assert after.ok
    assert engine.fake.started == ["running", "after"]


async def test_compile_job_checks_type_before_anything_runs() -> None:
    async with FakeEngine(arch=ARCH) as engine:
        with pytest.raises(InvalidJob, match="expected a CompileJob"):
            await engine.compile_many([fake_job("ok"), "oops"])  # type: ignore[list-item]
        assert engine.fake.started == []
        assert isinstance(fake_job("ok"), CompileJob)
