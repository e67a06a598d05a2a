"""Dispatch: priority slots, the cost model, longest-first batches, split compile, and
NVRTC workers started in the background without ever exceeding their number."""

from __future__ import annotations

import anyio
import pytest

from asynccomp import CompileJob, Engine
from asynccomp.cost import CostModel
from asynccomp.dispatch import PrioritySlots

from .kernels import ARCH, scale_kernel

pytestmark = pytest.mark.asyncio


async def test_slots_serve_lowest_key_first_and_fifo_among_equals() -> None:
    slots = PrioritySlots(1)
    order: list[str] = []

    async def job(name: str, key: tuple[float, ...]) -> None:
        async with slots.slot(key):
            order.append(name)
            await anyio.sleep(0.01)

    holder = slots.reserve((0.0,))  # granted at once: the only slot is free
    async with anyio.create_task_group() as tg:
        for name, key in [("c", (1.0, -1.0)), ("a", (0.0, -3.0)), ("b", (1.0, -2.0))]:
            tg.start_soon(job, name, key)
        tg.start_soon(job, "c2", (1.0, -1.0))
        await anyio.sleep(0.05)
        assert slots.waiting == 4 and slots.borrowed == 1 and order == []
        slots.withdraw(holder)  # hand the slot on, unused
    assert order == ["a", "b", "c", "c2"]
    assert (slots.waiting, slots.borrowed) == (0, 0)


async def test_a_reserved_batch_runs_in_key_order_whatever_order_tasks_start() -> None:
    slots = PrioritySlots(1)
    order: list[str] = []
    keys = {"short": (0.0, -1.0), "long": (0.0, -9.0), "middle": (0.0, -5.0)}
    tickets = dict(zip(keys, slots.reserve_batch(keys.values()), strict=True))

    async def run(name: str) -> None:
        async with slots.use(tickets[name]):
            order.append(name)
            await anyio.sleep(0.01)

    async with anyio.create_task_group() as tg:
        for name in keys:  # "short" starts first, yet "long" was granted the slot
            tg.start_soon(run, name)
    assert order == ["long", "middle", "short"]


async def test_cancelled_and_withdrawn_tickets_never_lose_a_slot() -> None:
    slots = PrioritySlots(1)
    got: list[str] = []

    async def wait_for(name: str, scope: anyio.CancelScope | None = None) -> None:
        with scope or anyio.CancelScope():
            async with slots.slot((0.0,)):
                got.append(name)

    holder = slots.reserve((0.0,))
    async with anyio.create_task_group() as tg:
        doomed = anyio.CancelScope()
        tg.start_soon(wait_for, "never", doomed)
        tg.start_soon(wait_for, "later")
        await anyio.sleep(0.01)
        assert slots.waiting == 2
        doomed.cancel()  # cancelled while waiting
        await anyio.sleep(0.01)
        assert slots.waiting == 1  # the cancelled waiter is gone
        slots.withdraw(holder)
        slots.withdraw(holder)  # idempotent
    assert got == ["later"]
    assert (slots.waiting, slots.borrowed) == (0, 0)

    # A waiter cancelled in the same step it is handed the slot either runs or passes the
    # slot on (depending on when the event loop delivers the cancellation): never loses it.
    holder = slots.reserve((0.0,))
    async with anyio.create_task_group() as tg:
        handed = anyio.CancelScope()
        tg.start_soon(wait_for, "handed", handed)
        await anyio.sleep(0.01)
        tg.start_soon(wait_for, "next")
        await anyio.sleep(0.01)
        slots.withdraw(holder)  # "handed" is granted the slot...
        handed.cancel()  # ...and cancelled before it runs
    assert got in (["later", "next"], ["later", "handed", "next"])
    assert (slots.waiting, slots.borrowed) == (0, 0)

    # A granted ticket that is withdrawn instead of used passes its slot on too.
    first, second = slots.reserve((0.0,)), slots.reserve((1.0,))
    assert (slots.borrowed, slots.waiting) == (1, 1)
    slots.withdraw(first)
    assert (slots.borrowed, slots.waiting) == (1, 0)
    async with slots.use(second):
        pass
    assert (slots.waiting, slots.borrowed) == (0, 0)
    with pytest.raises(RuntimeError, match="withdrawn"):
        async with slots.use(first):
            pass


@pytest.mark.filterwarnings("ignore::pytest.PytestWarning")  # a sync test under the mark
def test_cost_model_learns_and_generalizes_over_numbers() -> None:
    model = CostModel()
    small, big = "x" * 1_000, "x" * 100_000
    assert model.estimate("nvrtc", (), small) < model.estimate("nvrtc", (), big)
    model.observe("nvrtc", (), "tile = 16; body", 3.0)
    assert model.estimate("nvrtc", (), "tile = 16; body") == 3.0
    # Candidates that differ only in their numbers are "similar".
    assert model.estimate("nvrtc", (), "tile = 32; body") == 3.0
    # Other options or another backend are another compile.
    assert model.estimate("nvrtc", ("-G",), "tile = 16; body") < 1.0
    assert model.estimate("nvcc", (), "tile = 16; body") < 1.0
    model.observe("nvrtc", (), "tile = 16; body", 1.0)
    assert model.estimate("nvrtc", (), "tile = 16; body") == 2.0  # a running average


def _unrolled_kernel(statements: int, name: str) -> str:
    body = "".join(f"  a = a * {1.0 + i * 1e-3:.4f}f + {i}.0f;\n" for i in range(statements))
    return (
        f'extern "C" __global__ void {name}(float* x) {{\n'
        f"  float a = x[threadIdx.x];\n{body}  x[threadIdx.x] = a;\n}}\n"
    )


async def test_longest_first_within_a_batch() -> None:
    sizes = {"small": 10, "large": 600, "medium": 150, "tiny": 1}
    jobs = [CompileJob(_unrolled_kernel(n, name), name=name) for name, n in sizes.items()]
    # One worker: the completion order is the dispatch order.
    async with Engine(arch=ARCH, nvrtc_workers=1, cache=False) as engine:
        done = [r.job.name async for r in engine.as_completed(jobs)]
    assert done == ["large", "medium", "small", "tiny"]


async def test_learned_times_reorder_the_next_batch() -> None:
    model = CostModel()
    fast_but_big = CompileJob(scale_kernel(1.0) + "// padding\n" * 3000, name="big_fast")
    slow_but_small = CompileJob(_unrolled_kernel(800, "slow"), name="small_slow")
    assert len(fast_but_big.source) > len(slow_but_small.source)
    async with Engine(arch=ARCH, nvrtc_workers=1, cache=False, cost_model=model) as engine:
        first = [r.job.name async for r in engine.as_completed([fast_but_big, slow_but_small])]
        second = [r.job.name async for r in engine.as_completed([fast_but_big, slow_but_small])]
    assert first == ["big_fast", "small_slow"]  # by size: a wrong guess
    assert second == ["small_slow", "big_fast"]  # by the times it saw


async def test_split_compile_goes_to_the_job_that_would_finish_last() -> None:
    jobs = [
        CompileJob(_unrolled_kernel(1200, "long_one"), name="long"),
        *(CompileJob(scale_kernel(float(i)), name=f"short{i}") for i in range(3)),
    ]
    async with Engine(arch=ARCH, nvrtc_workers=2, cache=False, split_compile=2) as engine:
        results = await engine.compile_many(jobs)
    assert all(r.ok for r in results), [str(r.error) for r in results]
    split = [r.job.name for r in results if "--split-compile=2" in r.command]
    assert split == ["long"]


async def test_background_warm_start_never_exceeds_the_worker_count() -> None:
    pids: set[int] = set()
    jobs = [CompileJob(scale_kernel(float(i)), name=f"k{i}") for i in range(6)]
    async with Engine(arch=ARCH, nvrtc_workers=2, nvrtc_mode="processes", cache=False) as engine:
        pool = engine._backends["nvrtc"].pool  # type: ignore[attr-defined]

        async def watch() -> None:
            while True:
                pids.update(pool.worker_pids())
                assert len(pool.worker_pids()) <= 2
                await anyio.sleep(0.005)

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            # Jobs arrive while the background warm-up is still starting the workers.
            results = await engine.compile_many(jobs)
            await engine.warm_up()  # waits for workers still warming up
            pids.update(pool.worker_pids())
            assert len(pool.worker_pids()) == 2
            tg.cancel_scope.cancel()
    assert all(r.ok for r in results)
    assert len(pids) == 2  # the same two workers served every job


async def test_warm_start_off_starts_workers_on_first_need() -> None:
    async with Engine(
        arch=ARCH, nvrtc_workers=2, nvrtc_mode="processes", warm_start=False, cache=False
    ) as engine:
        pool = engine._backends["nvrtc"].pool  # type: ignore[attr-defined]
        await anyio.sleep(0.2)
        assert pool.worker_pids() == []
        assert (await engine.compile(CompileJob(scale_kernel()))).ok
        assert len(pool.worker_pids()) == 1
