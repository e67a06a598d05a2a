"""Faults that belong to one job stay with that job, on the real compilers: a full disk,
undecodable text, NVRTC API errors, workers that cannot start, die while idle or while
compiling, or stop answering; timeouts and cancellation."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import psutil
import pytest

from asynccomp import (
    CompileError,
    CompileJob,
    CompileResult,
    CompileTimeout,
    EmptyOutput,
    Engine,
    InternalError,
    WorkerCrashed,
)
from asynccomp.backends import _nvrtc_workers

from .filesystems import full_disk
from .kernels import ARCH, broken_kernel, needs_nvcc, scale_kernel, slow_kernel
from .processes import (
    compiler_processes,
    gone,
    nvrtc_workers,
    running_tool,
    wait_busy,
    wait_until,
)

NVRTC_MODES = ["processes", "threads"]

#: A kernel that compiles for far longer than any allowance below (about 30 s here, and
#: several times its timeout on any machine): a job of it ends by its timeout or not at all.
VERY_SLOW = slow_kernel(60000)

#: What a loaded machine may add to a stop that is due at timeout + grace (processes that
#: wait for a core, a kill that is reaped late). Generous, yet far below VERY_SLOW's time.
LOAD_ALLOWANCE = 8.0


def ended_by_its_timeout(result: CompileResult) -> bool:
    """Whether the job ended at its timeout (plus the kill grace and a loaded machine's
    delay), not when its compile would have finished on its own."""
    assert result.job.timeout is not None
    limit = result.job.timeout + _nvrtc_workers.KILL_GRACE + LOAD_ALLOWANCE
    return result.elapsed < limit


@needs_nvcc
async def test_full_temporary_disk_fails_only_the_nvcc_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jobs = [CompileJob(scale_kernel(float(i)), name=f"nvrtc{i}") for i in range(3)]
    jobs.append(CompileJob(scale_kernel(9.0), name="nvcc", backend="nvcc"))
    with full_disk(tmp_path) as full:
        monkeypatch.setattr(tempfile, "tempdir", str(full))
        async with Engine(arch=ARCH, nvrtc_workers=2, nvrtc_mode="processes") as engine:
            *good, nvcc = await engine.compile_many(jobs)
    assert all(r.ok for r in good), [str(r.error) for r in good]
    assert isinstance(nvcc.error, InternalError)
    assert "No space left on device" in str(nvcc.error)
    assert nvcc.error.job is nvcc.job


LATIN1 = scale_kernel(3.0).encode() + "// caf\xe9, na\xefve: Latin-1, not UTF-8\n".encode("latin-1")


@pytest.mark.parametrize(
    "backend,mode",
    [
        ("nvrtc", "processes"),
        ("nvrtc", "threads"),
        pytest.param("nvcc", "threads", marks=needs_nvcc),
    ],
)
async def test_bytes_that_are_not_utf8_are_compiled_as_they_are(
    backend: str, mode: Any, tmp_path: Path
) -> None:
    # A .cu file read with errors="surrogateescape" keeps its bytes; every backend, the
    # cache and the dump give the compiler (and the user) exactly those bytes.
    source = LATIN1.decode("utf-8", "surrogateescape")
    job = CompileJob(source, name="latin1", backend=backend, dump=tmp_path)
    async with Engine(arch=ARCH, nvrtc_workers=2, nvrtc_mode=mode) as engine:
        result, again = await engine.compile_many([job, job])
        hit = await engine.compile(job)
    assert result.ok, result.error
    assert again.ok and hit.ok and hit.cached
    assert result.dump_dir is not None
    assert (result.dump_dir / "latin1.cu").read_bytes() == LATIN1


async def test_nvrtc_api_error_in_threads_fails_only_its_job(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # NVRTC API errors cannot be provoked on demand, so the second call of one API
    # function reports one (the compiles themselves are real).
    from cuda.bindings import nvrtc

    real = nvrtc.nvrtcGetCUBINSize
    calls = 0

    def flaky(prog: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 2:
            return nvrtc.nvrtcResult.NVRTC_ERROR_INVALID_PROGRAM, 0
        return real(prog)

    monkeypatch.setattr(nvrtc, "nvrtcGetCUBINSize", flaky)
    jobs = [CompileJob(scale_kernel(float(i)), name=f"k{i}") for i in range(3)]
    async with Engine(arch=ARCH, nvrtc_workers=1, nvrtc_mode="threads", cache=False) as engine:
        results = await engine.compile_many(jobs)
    failed = [r for r in results if not r.ok]
    assert len(failed) == 1 and sum(r.ok for r in results) == 2
    assert isinstance(failed[0].error, InternalError)
    assert "nvrtcGetCUBINSize failed" in str(failed[0].error)


@pytest.mark.parametrize("mode", NVRTC_MODES)
async def test_success_without_a_binary_is_empty_output(mode: Any) -> None:
    # -dlto: NVRTC succeeds and makes LTO IR, no cubin.
    job = CompileJob(scale_kernel(), options=["-dlto"])
    async with Engine(arch=ARCH, nvrtc_workers=1, nvrtc_mode=mode) as engine:
        result = await engine.compile(job)
    assert isinstance(result.error, EmptyOutput)
    assert "produced no cubin" in str(result.error)


async def test_workers_that_cannot_start_fail_their_jobs_not_the_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_nvrtc_workers, "worker_python", lambda: "/nonexistent/python")
    async with Engine(arch=ARCH, nvrtc_workers=2, nvrtc_mode="processes") as engine:
        await engine.warm_up()  # logs the failure, raises nothing
        results = await engine.compile_many([CompileJob(scale_kernel(float(i))) for i in range(3)])
    for result in results:
        assert isinstance(result.error, WorkerCrashed)
        assert "no NVRTC worker could be started" in str(result.error)


async def test_a_worker_that_died_idle_costs_no_job() -> None:
    async with Engine(arch=ARCH, nvrtc_workers=1, nvrtc_mode="processes", cache=False) as engine:
        assert (await engine.compile(CompileJob(scale_kernel(1.0)))).ok
        [idle] = nvrtc_workers()
        os.kill(idle, signal.SIGKILL)  # as an out-of-memory kill would
        await wait_until(lambda: gone([idle]))
        result = await engine.compile(CompileJob(scale_kernel(2.0), name="innocent"))
        assert result.ok, result.error
        assert nvrtc_workers() not in ([], [idle])


async def test_killed_nvrtc_worker_fails_only_its_job() -> None:
    async with Engine(arch=ARCH, nvrtc_workers=2, nvrtc_mode="processes", cache=False) as engine:
        await engine.warm_up()
        assert len(nvrtc_workers()) == 2

        async def kill_the_busy_one() -> None:
            os.kill(await wait_busy(nvrtc_workers()), signal.SIGKILL)

        async with anyio.create_task_group() as tg:
            tg.start_soon(kill_the_busy_one)
            crashed = await engine.compile(CompileJob(slow_kernel(), name="victim"))
        after = await engine.compile_many([CompileJob(scale_kernel(float(i))) for i in range(3)])
    assert isinstance(crashed.error, WorkerCrashed)
    assert "SIGKILL" in str(crashed.error)
    assert all(r.ok for r in after)
    assert compiler_processes() == []


@pytest.mark.parametrize("mode", NVRTC_MODES)
async def test_a_timeout_ends_the_job_within_a_second_of_it(mode: Any) -> None:
    job = CompileJob(VERY_SLOW, name="slow", timeout=1.0)
    async with Engine(arch=ARCH, nvrtc_workers=2, nvrtc_mode=mode, cache=False) as engine:
        result, quick = await engine.compile_many([job, CompileJob(scale_kernel())])
        stats = engine.statistics()
    assert isinstance(result.error, CompileTimeout)
    assert result.error.timeout == 1.0
    assert "timed out after 1 s" in str(result.error)
    # NVRTC's flow callback may come seconds late: past timeout + grace the worker is
    # killed (or, in threads, the thread left to stop), and the result is on time.
    assert ended_by_its_timeout(result), result.elapsed
    assert quick.ok
    assert stats.timed_out == 1
    assert compiler_processes() == []


@needs_nvcc
async def test_nvcc_timeout_kills_nvcc() -> None:
    job = CompileJob(VERY_SLOW, name="slow", backend="nvcc", timeout=1.0)
    async with Engine(arch=ARCH) as engine:
        result = await engine.compile(job)
    assert isinstance(result.error, CompileTimeout)
    assert "nvcc was killed" in str(result.error)
    assert ended_by_its_timeout(result), result.elapsed
    assert compiler_processes() == []


async def test_a_worker_that_stops_answering_mid_compile_is_killed_at_the_timeout() -> None:
    # A stopped worker can neither see NVRTC's flow callback nor answer: the pool gives
    # up on it after timeout + grace, kills it and starts a replacement.
    async with Engine(arch=ARCH, nvrtc_workers=1, nvrtc_mode="processes", cache=False) as engine:
        await engine.warm_up()
        [frozen] = nvrtc_workers()

        async def freeze_it_while_compiling() -> None:
            await wait_busy([frozen])  # it took the job, and compiles
            os.kill(frozen, signal.SIGSTOP)

        async with anyio.create_task_group() as tg:
            tg.start_soon(freeze_it_while_compiling)
            stuck = await engine.compile(CompileJob(VERY_SLOW, name="stuck", timeout=1.0))
        assert not psutil.pid_exists(frozen)  # killed and reaped
        after = await engine.compile(CompileJob(scale_kernel(3.0)))
        assert nvrtc_workers() not in ([], [frozen])
    assert isinstance(stuck.error, CompileTimeout)
    assert "worker killed" in str(stuck.error)
    assert ended_by_its_timeout(stuck), stuck.elapsed
    assert after.ok, after.error
    assert compiler_processes() == []


async def test_a_worker_stopped_while_idle_costs_no_job() -> None:
    async with Engine(arch=ARCH, nvrtc_workers=1, nvrtc_mode="processes", cache=False) as engine:
        await engine.warm_up()
        [frozen] = nvrtc_workers()
        os.kill(frozen, signal.SIGSTOP)
        # It never acknowledges the job: killed after a grace, the job goes elsewhere.
        result = await engine.compile(CompileJob(scale_kernel(2.0), name="innocent"))
        assert result.ok, result.error
        assert not psutil.pid_exists(frozen)
    assert compiler_processes() == []


async def test_a_cancelled_compile_keeps_its_warm_worker() -> None:
    async with Engine(arch=ARCH, nvrtc_workers=1, nvrtc_mode="processes", cache=False) as engine:
        await engine.warm_up()
        [worker] = nvrtc_workers()
        cancelled_at: list[float] = []
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:

                async def cancel_once_compiling() -> None:
                    await wait_busy([worker])  # NVRTC compiles the job in it now
                    cancelled_at.append(time.monotonic())
                    scope.cancel()

                tg.start_soon(cancel_once_compiling)
                await engine.compile(CompileJob(VERY_SLOW, name="cancelled"))
        assert scope.cancelled_caught
        # Returned at the cancel, not at the end of a compile that would take far longer.
        assert time.monotonic() - cancelled_at[0] < LOAD_ALLOWANCE
        # NVRTC stopped inside the worker, which is kept (warm) for the next job, unless
        # the flow callback came too late (then the worker was replaced).
        after = await engine.compile(CompileJob(scale_kernel(4.0)))
        assert after.ok
        assert len(nvrtc_workers()) == 1
        assert engine.statistics().running == 0


@needs_nvcc
async def test_cancelled_batch_leaves_no_process_or_temp_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    jobs = [CompileJob(slow_kernel(), name=f"slow{i}", backend="nvcc") for i in range(3)]
    jobs.append(CompileJob(slow_kernel(), name="slow_nvrtc"))
    async with Engine(arch=ARCH, nvcc_workers=2) as engine:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:

                async def cancel_once_compiling() -> None:
                    # cicc runs: nvcc has written its temporaries, NVRTC's worker its own.
                    await wait_until(lambda: running_tool("cicc"))
                    scope.cancel()

                tg.start_soon(cancel_once_compiling)
                await engine.compile_many(jobs)
        assert scope.cancelled_caught
        assert engine.statistics().running == 0
    assert [(p.pid, p.cmdline()) for p in compiler_processes()] == []
    # Only the one empty, read-only folder NVRTC workers run in and the folder of the
    # workers' own folders (each made once per user), both empty: every worker's folder
    # (its $TMPDIR, where NVRTC puts precompiled headers) went with it.
    left = {p.name for p in tmp_path.iterdir()}  # noqa: ASYNC240
    assert left <= {f"asynccomp-empty-{os.getuid()}", f"asynccomp-nvrtc-{os.getuid()}"}
    inside = [list((tmp_path / name).iterdir()) for name in left]
    assert all(folder == [] for folder in inside), inside


@needs_nvcc
async def test_nvcc_keeps_its_temporaries_in_the_jobs_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # nvcc writes tmpxft_* files to $TMPDIR; a killed nvcc would leave them there.
    spare = tmp_path / "tmp"
    spare.mkdir()
    monkeypatch.setenv("TMPDIR", str(spare))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "work"))
    (tmp_path / "work").mkdir()
    async with Engine(arch=ARCH) as engine:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:

                async def cancel_once_compiling() -> None:
                    await wait_until(lambda: running_tool("cicc"))  # temporaries written
                    scope.cancel()

                tg.start_soon(cancel_once_compiling)
                await engine.compile(CompileJob(slow_kernel(), name="slow", backend="nvcc"))
        assert scope.cancelled_caught
        done = await engine.compile(CompileJob(scale_kernel(), backend="nvcc"))
    assert done.ok
    assert list(spare.iterdir()) == []
    # The engine's NVRTC template (started with it) runs in the user's empty folder: no
    # temporaries of nvcc's.
    left = list((tmp_path / "work").iterdir())
    assert [p.name for p in left] in ([], [f"asynccomp-empty-{os.getuid()}"])
    assert all(list(p.iterdir()) == [] for p in left)


async def test_identical_jobs_get_their_own_error_objects() -> None:
    first = CompileJob(broken_kernel(), name="b", timeout=30)
    second = CompileJob(broken_kernel(), name="b", timeout=60)  # same compile, other job
    async with Engine(arch=ARCH, cache_dir=False, cache_failures=True) as engine:
        one, two = await engine.compile_many([first, second])
        hit = await engine.compile(second)
        stats = engine.statistics()
    assert stats.compiled == 1
    for result in (one, two, hit):
        assert isinstance(result.error, CompileError)
        assert result.error.job is result.job
    assert one.error is not two.error and two.error is not hit.error
    assert two.job is second and one.job is first and hit.cached
