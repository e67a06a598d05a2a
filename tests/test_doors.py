"""Every door answers the same: one table of cases, each run through every door (an
``Engine`` in process, on a real compile server, a ``SyncEngine`` in process and on the
server, an ``Engine`` on a real two-node Ray cluster), each door's observation compared
with the in-process one: the exception raised, each result's outcome, and the engine's
statistics (running, compiled, deduplicated), and the workers where their count is
well defined (every slot's worker after a warm-up, at least one during a compile). The
Ray door runs whenever Ray is installed: a cluster that cannot start fails its tests,
and without Ray they are skipped, saying so.

Real NVRTC compiles everywhere; each case's sources carry a token of their own, so no
door is answered from another's cache."""

from __future__ import annotations

import importlib.util
import itertools
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import astuple, dataclass
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from asynccomp import (
    CompileError,
    CompileJob,
    CompileResult,
    CompileTimeout,
    EngineStatistics,
    InvalidJob,
    SettingsError,
)
from asynccomp import server as server_api
from asynccomp.backends import NvJitLinkBackend, PtxBackend
from asynccomp.toolkit import find_toolkit

from .doors import Door, DoorEngine, open_door
from .kernels import ARCH, broken_kernel, ptx_kernel, scale_kernel, slow_kernel
from .ray_cluster import RayCluster, compiling_actors
from .servers import running_server, server_folder

_tokens = itertools.count()


def tagged(source: str) -> str:
    """``source`` made unique to one case and door."""
    return f"{source}// token {next(_tokens)} {id(_tokens)}\n"


@dataclass(frozen=True)
class Seen:
    """What a case saw through a door. The worker count itself is not the same
    everywhere (a Ray engine's actors are the cluster's, a local engine's one per CPU,
    a local worker is killed at a timeout): ``workers`` says what must hold of it where
    that is well defined (``None``: nothing), and that is compared."""

    raised: str | None
    results: tuple[tuple[bool, str | None, bool], ...]  # ok, error type, cached
    stats: tuple[int, ...]  # EngineStatistics but workers
    workers: str | None = None


def seen(
    results: list[CompileResult],
    stats: EngineStatistics,
    raised: BaseException | str | None = None,
    workers: str | None = None,
) -> Seen:
    outcomes = tuple(
        (r.ok, None if r.error is None else type(r.error).__name__, r.cached) for r in results
    )
    counts = astuple(stats)[:-1]
    said = raised if isinstance(raised, str) or raised is None else type(raised).__name__
    return Seen(said, outcomes, counts, workers)


def at_least_one(workers: int) -> str:
    return "at least one" if workers >= 1 else f"{workers}"


Case = Callable[[Door], Awaitable[Seen]]


async def unsupported_arch(door: Door) -> Seen:
    """An architecture the compilers lack: refused as the engine starts (a setting's
    error), and for a job before anything runs (a job's)."""
    with pytest.raises(InvalidJob, match="sm_999") as started:
        async with open_door(door, arch="sm_999"):
            pass
    async with open_door(door, arch=ARCH) as engine:
        with pytest.raises(InvalidJob, match="sm_999") as called:
            await engine.compile(CompileJob(tagged(scale_kernel()), arch="sm_999"))
        stats = await engine.statistics()
    assert type(started.value) is SettingsError and type(called.value) is InvalidJob
    return seen([], stats, called.value)


async def make_pch_refused(door: Door) -> Seen:
    """``make_pch`` of a job that cannot run raises what its compile would, before
    anything runs; of a job without ``pch=True`` nothing is made (False) anywhere."""
    async with open_door(door, arch=ARCH) as engine:
        with pytest.raises(InvalidJob, match="sm_999") as called:
            bad = CompileJob(tagged(scale_kernel()), arch="sm_999", pch=True)
            await engine._call("make_pch", bad)
        made = await engine._call("make_pch", CompileJob(tagged(scale_kernel())))
        stats = await engine.statistics()
    assert made is False
    return seen([], stats, called.value)


async def refused_batch(door: Door) -> Seen:
    """One bad job refuses the whole batch before any of it runs."""
    good = [CompileJob(tagged(scale_kernel(float(i)))) for i in range(3)]
    bad = CompileJob(tagged(scale_kernel()), arch="sm_999")
    async with open_door(door, arch=ARCH) as engine:
        with pytest.raises(InvalidJob) as raised:
            await engine.compile_many([*good, bad])
        stats = await engine.statistics()
    return seen([], stats, raised.value)


async def compile_error(door: Door) -> Seen:
    """A compile error is a result (its message names the undefined identifier), and
    two identical jobs in one batch compile once."""
    source = tagged(scale_kernel(3.0))
    jobs = [
        CompileJob(tagged(broken_kernel()), name="bad"),
        CompileJob(source, name="a"),
        CompileJob(source, name="b"),
    ]
    async with open_door(door, arch=ARCH) as engine:
        results = await engine.compile_many(jobs)
        stats = await engine.statistics()
    error = results[0].error
    assert isinstance(error, CompileError) and "undefined_identifier_42" in str(error)
    assert error.job is jobs[0] and "undefined_identifier_42" in error.log
    assert [r.job for r in results] == jobs
    assert results[1].binary == results[2].binary and results[1].resources["scale"].registers > 0
    # A worker compiled them (an NVRTC worker, an actor).
    return seen(results, stats, workers=at_least_one(stats.workers))


async def timeout(door: Door) -> Seen:
    job = CompileJob(tagged(slow_kernel()), name="slow", timeout=1.0)
    async with open_door(door, arch=ARCH) as engine:
        result = await engine.compile(job)
        stats = await engine.statistics()
    assert isinstance(result.error, CompileTimeout) and result.error.timeout == 1.0
    return seen([result], stats)


async def cancelled_call(door: Door) -> Seen:
    """Leaving ``as_completed`` after the first result cancels the compile still
    running; the engine goes on."""
    quick = CompileJob(tagged(scale_kernel(5.0)), name="quick")
    slow = CompileJob(tagged(slow_kernel()), name="slow")
    async with open_door(door, arch=ARCH) as engine:
        first = await engine.first_of([slow, quick])
        await engine.wait_for(lambda s: s.running == 0 and s.queued == 0, within=30)
        after = await engine.compile(CompileJob(tagged(scale_kernel(6.0))))
        stats = await engine.statistics()
    assert first.job is quick and after.ok
    return seen([first, after], stats)


async def prefetch(door: Door) -> Seen:
    """Prefetched compiles are counted (successes as successes) and answer later
    calls from the cache."""
    jobs = [CompileJob(tagged(scale_kernel(float(i))), name=f"p{i}") for i in range(3)]
    async with open_door(door, arch=ARCH) as engine:
        await engine.prefetch(jobs)
        await engine.wait_for(lambda s: s.completed == 3)
        again = await engine.compile(jobs[1])
        stats = await engine.statistics()
    assert again.ok and again.cached
    return seen([again], stats)


async def large_sources(door: Door) -> Seen:
    """Sources larger than a frame (6 MB each, frames are 4 MiB) compile as in
    process, binary for binary."""
    padding = ("// " + "x" * 97 + "\n") * 60000
    jobs = [CompileJob(tagged(scale_kernel(float(i))) + padding, name=f"l{i}") for i in range(3)]
    async with open_door(door, arch=ARCH) as engine:
        results = await engine.compile_many(jobs)
        stats = await engine.statistics()
    assert [r.binary is not None and r.binary.startswith(b"\x7fELF") for r in results] == [True] * 3
    return seen(results, stats)


async def running_now(door: Door) -> Seen:
    """While a compile runs, ``statistics().running`` and ``running()`` say so."""
    slow = CompileJob(tagged(slow_kernel(8000)), name="slow")
    results: list[CompileResult] = []

    async def run(engine: DoorEngine) -> None:
        results.append(await engine.compile(slow))

    async with open_door(door, arch=ARCH) as engine:
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, engine)
            # A job counts as running once its backend has it, before the first NVRTC
            # worker process of a fresh engine is up: wait for both (the worker count
            # comes within the compile's seconds, or this fails at the deadline).
            await engine.wait_for(lambda s: s.running == 1 and s.workers >= 1)
            during = await engine.statistics()
            running = await engine._call("running")
        assert [job for job, _ in running] == [slow]
        assert (during.running, during.queued, during.completed, during.compiled) == (1, 0, 0, 1)
        after = seen(results, await engine.statistics(), workers=at_least_one(during.workers))
    return after


async def warm_up_twice(door: Door) -> Seen:
    """Two warm-ups at once: after them every slot has its worker (NVRTC workers, a
    server's, a cluster's actors)."""
    async with open_door(door, arch=ARCH) as engine:
        await engine.warm_up_twice()
        warm = await engine.statistics()
        slots = engine.slots()
        result = await engine.compile(CompileJob(tagged(scale_kernel(7.0))))
        stats = await engine.statistics()
    # At least: a shared server may also hold another backend's workers (nvJitLink's,
    # from an earlier case of the table).
    workers = "every slot's" if warm.workers >= slots >= 1 else f"{warm.workers} for {slots}"
    return seen([result], stats, workers=workers)


async def cancelled_compile(door: Door) -> Seen:
    """A ``compile()`` cancelled while it compiles: the caller sees its cancellation
    and nothing else, nothing of it runs on (here, on the server, on the cluster), it
    is counted as started and not completed, and the engine goes on."""
    if door.kind == "sync":
        pytest.skip(
            "a blocking call has no cancellation its caller can make from another "
            "thread; Ctrl-C in one is tests/test_sync.py::"
            "test_ctrl_c_in_a_blocking_call_cancels_its_compile"
        )
    slow = CompileJob(tagged(slow_kernel()), name="slow")
    caught: list[bool] = []
    async with open_door(door, arch=ARCH) as engine:
        scope = anyio.CancelScope()

        async def call() -> None:
            with scope:
                await engine.compile(slow)
            caught.append(scope.cancelled_caught)

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await engine.wait_for(lambda s: s.running == 1)
            scope.cancel()
        await engine.wait_for(lambda s: s.running == 0 and s.queued == 0, within=30)
        await nothing_runs_behind(door)
        after = await engine.compile(CompileJob(tagged(scale_kernel(8.5))))
        stats = await engine.statistics()
    assert caught == [True] and after.ok
    return seen([after], stats, raised="cancelled")


async def nothing_runs_behind(door: Door) -> None:
    """Nothing of a cancelled compile runs on where the door compiles."""
    with anyio.fail_after(30):
        if door.server is not None:
            while (await anyio.to_thread.run_sync(server_api.status, door.server))["running"]:  # noqa: ASYNC110
                await anyio.sleep(0.05)
        if door.ray_address is not None:
            while compiling_actors():  # noqa: ASYNC110 - processes signal nothing
                await anyio.sleep(0.05)


def ptx_readable(ptx: str) -> str:
    """NVRTC's PTX with its ``.version`` set to 8.0: NVRTC may be newer than the
    toolkit's ptxas (here NVRTC 13.5 writes PTX 9.5, ptxas 13.0 reads up to 9.0, and
    says so itself), and this kernel uses nothing newer than 8.0."""
    return re.sub(r"^\.version \S+", ".version 8.0", ptx, count=1, flags=re.M)


async def ptx_backend(door: Door) -> Seen:
    """The third backend through every door: hand-written PTX in bulk, PTX that the
    door's own NVRTC wrote (``output="ptx"``), and a ``.target`` the engine's arch
    cannot take (the job's CompileError, before ptxas runs); resources from ptxas -v."""
    if PtxBackend.version(find_toolkit()) is None:
        pytest.skip("ptxas not found (CUDA toolkit)")
    return await _ptx_through(door, "ptx", ptx_readable, 7.0)


async def nvjitlink_backend(door: Door) -> Seen:
    """The fourth backend through every door: PTX in bulk with nvJitLink in threads of
    whichever process compiles (the server's, a Ray actor's), NVRTC's PTX as it is
    (nvJitLink is of NVRTC's release), and a ``.target`` the engine's arch cannot take;
    resources from -verbose (ptxas's report)."""
    if NvJitLinkBackend.version(None) is None:
        pytest.skip("nvJitLink is not installed (pip install nvidia-nvjitlink)")
    return await _ptx_through(door, "nvjitlink", lambda ptx: ptx, 8.0)


async def _ptx_through(
    door: Door, backend: str, readable: Callable[[str], str], factor: float
) -> Seen:
    """PTX through ``door`` on the PTX ``backend``: four hand-written kernels, the
    door's NVRTC's PTX of ``scale_kernel(factor)`` (made ``readable`` for the backend),
    and one whose ``.target`` the arch cannot take."""
    hand = [
        CompileJob(tagged(ptx_kernel(float(i))), name=f"{backend}{i}", backend=backend)
        for i in range(4)
    ]
    async with open_door(door, arch=ARCH) as engine:
        made = await engine.compile(CompileJob(tagged(scale_kernel(factor)), output="ptx"))
        ptx = made.unwrap().decode()
        from_nvrtc = CompileJob(tagged(readable(ptx)), name="nvrtc_ptx", backend=backend)
        mismatch = CompileJob(tagged(ptx_kernel(target="sm_100a")), name="b", backend=backend)
        results = await engine.compile_many([*hand, from_nvrtc, mismatch])
        stats = await engine.statistics()
    for result in results[:-1]:
        assert result.ok, result.error
        assert result.unwrap().startswith(b"\x7fELF") and result.output == "cubin"
        assert result.resources["scale"].arch == ARCH  # the resource report, parsed
        assert result.resources["scale"].registers > 0
    error = results[-1].error
    assert isinstance(error, CompileError) and ".target sm_100a" in str(error)
    return seen([made, *results], stats)


CASES: dict[str, Case] = {
    "ptx_backend": ptx_backend,
    "nvjitlink_backend": nvjitlink_backend,
    "unsupported_arch": unsupported_arch,
    "refused_batch": refused_batch,
    "make_pch_refused": make_pch_refused,
    "compile_error": compile_error,
    "timeout": timeout,
    "cancelled_call": cancelled_call,
    "prefetch": prefetch,
    "large_sources": large_sources,
    "running_now": running_now,
    "warm_up_twice": warm_up_twice,
    "cancelled_compile": cancelled_compile,
}


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cache folder of the table's server, and of every test of the table."""
    return tmp_path_factory.mktemp("doors-cache")


@pytest.fixture(autouse=True)
def same_cache_as_the_server(shared_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A client whose $ASYNCCOMP_CACHE_DIR differs from its server's is warned (tested
    # in test_server.py); here every door uses one folder (the tokens keep cases apart).
    monkeypatch.setenv("ASYNCCOMP_CACHE_DIR", str(shared_cache))


@pytest.fixture(scope="module")
def server_socket(shared_cache: Path) -> Iterator[Path]:
    with (
        server_folder() as folder,
        running_server(folder, "--cache-dir", str(shared_cache)) as (_, paths),
    ):
        yield paths.socket


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    """The two-node cluster's address. Without Ray the Ray door's tests are skipped,
    saying so; with Ray, a cluster that cannot start fails them."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("the Ray door needs Ray (pip install '.[ray]')")
    cluster = RayCluster()
    try:
        yield cluster.address
    finally:
        cluster.shutdown()


@pytest.fixture(scope="module")
def in_process() -> dict[str, Seen]:
    """Each case's observation in process, made once: what every door is compared to."""
    return {}


DOORS = ("server", "sync", "sync on server", "ray")


def _door(name: str, request: pytest.FixtureRequest) -> Door:
    if name == "ray":
        return Door("ray", "engine", ray_address=request.getfixturevalue("ray_address"))
    kind = "sync" if name.startswith("sync") else "engine"
    server = request.getfixturevalue("server_socket") if "server" in name else None
    return Door(name, kind, server=server)


@pytest.mark.parametrize("door", DOORS)
@pytest.mark.parametrize("case", list(CASES))
async def test_every_door_answers_as_in_process(
    case: str, door: str, in_process: dict[str, Seen], request: pytest.FixtureRequest
) -> None:
    through = _door(door, request)  # a door that cannot open fails (or skips) first
    if case not in in_process:
        in_process[case] = await CASES[case](Door("in process", "engine"))
    observed = await CASES[case](through)
    assert observed == in_process[case], f"in process: {in_process[case]}"


def test_the_table_covers_every_door(request: pytest.FixtureRequest) -> None:
    doors = [_door(name, request) for name in DOORS if name != "ray"]
    kinds = {(door.kind, door.server is not None) for door in doors}
    assert kinds == {("engine", True), ("sync", False), ("sync", True)}
    assert set(DOORS) == {"server", "sync", "sync on server", "ray"}
