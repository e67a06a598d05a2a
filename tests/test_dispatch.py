"""Dispatch: the slot queue, the cost model, longest-first batches, split compile."""

from __future__ import annotations

import pytest

from asynccomp import CompileJob, CompileResult, Engine
from asynccomp._scheduler._dispatch import SlotQueue
from asynccomp.cost import CostModel

from .kernels import ARCH, scale_kernel


def test_slots_start_lowest_key_first_and_fifo_among_equals() -> None:
    started: list[str] = []
    queue: SlotQueue[str] = SlotQueue(1, started.append)
    queue.submit((0.0,), "holder")  # a free slot: started at once
    for name, key in [("c", (1.0, -1.0)), ("a", (0.0, -3.0)), ("b", (1.0, -2.0))]:
        queue.submit(key, name)
    queue.submit((1.0, -1.0), "c2")
    assert (queue.waiting, queue.running) == (4, 1) and started == ["holder"]
    for _ in range(5):
        queue.release()
    assert started == ["holder", "a", "b", "c", "c2"]
    assert (queue.waiting, queue.running) == (0, 0)
    with pytest.raises(RuntimeError, match="never taken"):
        queue.release()


def test_withdrawn_entries_never_take_a_slot() -> None:
    started: list[str] = []
    queue: SlotQueue[str] = SlotQueue(2, started.append)
    queue.submit((0.0,), "running")
    entries = [queue.submit((1.0, float(i)), f"w{i}") for i in range(200)]
    assert started == ["running", "w0"]
    assert not queue.withdraw(entries[0])  # already started
    for entry in entries[1:150]:
        assert queue.withdraw(entry)
        assert not queue.withdraw(entry)  # once
    assert queue.waiting == 50
    queue.release()
    queue.release()
    assert started[-2:] == ["w150", "w151"]
    assert len(queue._heap) <= 2 * queue.waiting + 64  # withdrawn entries are dropped


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


async def _in_completion_order(engine: Engine, jobs: list[CompileJob]) -> list[CompileResult]:
    async with engine.as_completed(jobs) as results:
        return [r async for r in results]


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
    async with (
        Engine(arch=ARCH, nvrtc_workers=1, cache=False) as engine,
        engine.as_completed(jobs) as results,
    ):
        done = [r.job.name async for r in results]
    assert done == ["large", "medium", "small", "tiny"]


async def test_learned_times_reorder_the_next_batch() -> None:
    model = CostModel()
    fast_but_big = CompileJob(scale_kernel(1.0) + "// padding\n" * 3000, name="big_fast")
    slow_but_small = CompileJob(_unrolled_kernel(800, "slow"), name="small_slow")
    assert len(fast_but_big.source) > len(slow_but_small.source)
    async with Engine(arch=ARCH, nvrtc_workers=1, cache=False, cost_model=model) as engine:
        first = [
            r.job.name for r in await _in_completion_order(engine, [fast_but_big, slow_but_small])
        ]
        second = [
            r.job.name for r in await _in_completion_order(engine, [fast_but_big, slow_but_small])
        ]
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
