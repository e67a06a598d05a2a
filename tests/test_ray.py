"""asynccomp.ray on real Ray clusters of this machine: a head and a worker node
(``ray.cluster_utils.Cluster``) of one CPU each, this test process their driver, started
once for the module (about 4 s) and shut down after it. Real NVRTC and nvcc compile in
the actors; faults are real (actor processes killed, a node removed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

import anyio
import psutil
import pytest

from asynccomp import (
    ClusterError,
    ClusterWarning,
    CompileJob,
    CompileResult,
    CompileTimeout,
    Engine,
    SettingsError,
    WorkerCrashed,
    find_toolkit,
)
from asynccomp.backends import BackendOptions, NvrtcBackend, backend_names
from asynccomp.ray import RayExecutor
from asynccomp.ray._actor import CompileActor, toolkit_identity
from asynccomp.ray._actors import Actor
from asynccomp.ray._pool import ActorPool
from asynccomp.server import status

from .kernels import ARCH, needs_nvcc, scale_kernel, slow_kernel
from .processes import wait_until
from .ray_cluster import RayCluster, actor_processes, compiling_actors, needs_ray
from .redis_server import RedisServer
from .servers import running_server, server_folder

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    started = RayCluster()
    try:
        yield started
    finally:
        started.shutdown()


def small_jobs(count: int, backend: Literal["nvrtc", "nvcc"] = "nvrtc") -> list[CompileJob]:
    return [
        CompileJob(scale_kernel(float(i)), name=f"{backend}_{i}", backend=backend)
        for i in range(count)
    ]


async def all_actors_gone(pids: list[int]) -> None:
    await wait_until(lambda: not any(psutil.pid_exists(p) for p in pids), within=15)


# -- results ---------------------------------------------------------------------------


@needs_nvcc
async def test_same_bytes_as_local_workers_spread_over_both_nodes(cluster: RayCluster) -> None:
    jobs = [*small_jobs(3), *small_jobs(2, "nvcc")]
    async with Engine(arch=ARCH, cache=False, executor=RayExecutor()) as engine:
        assert engine.on_cluster and engine.statistics().workers == 2
        # One actor per node (SPREAD): a lost node costs half the actors, not all.
        assert len(actor_processes(cluster.head)) == len(actor_processes(cluster.worker)) == 1
        remote = await engine.compile_many(jobs)
    async with Engine(arch=ARCH, cache=False) as local:
        here = await local.compile_many(jobs)
    for a, b in zip(remote, here, strict=True):
        assert a.ok, a.error
        assert a.binary == b.binary and a.resources == b.resources  # logs carry times


async def test_a_repeated_job_never_reaches_the_cluster_again(
    cluster: RayCluster, tmp_path: Path, team_key: str
) -> None:
    redis = RedisServer(tmp_path)
    try:
        jobs = small_jobs(3)
        settings = {"arch": ARCH, "cache_dir": False, "remote_cache": redis.url}
        async with Engine(**settings, executor=RayExecutor()) as engine:  # type: ignore[arg-type]
            first = await engine.compile_many(jobs)
            again = await engine.compile_many(jobs)  # this engine's memory tier
            assert engine.statistics().compiled == 3
        # A fresh engine (no memory, no disk) finds them in the shared Redis tier.
        async with Engine(**settings, executor=RayExecutor()) as fresh:  # type: ignore[arg-type]
            remote = await fresh.compile_many(jobs)
            assert fresh.statistics().compiled == 0
    finally:
        redis.stop()
    assert all(r.ok for r in first)
    assert [r.binary for r in again] == [r.binary for r in remote] == [r.binary for r in first]
    assert all(r.cached for r in (*again, *remote))


@needs_nvcc
async def test_dumps_are_written_here_with_the_same_files(
    cluster: RayCluster, tmp_path: Path
) -> None:
    jobs = [*small_jobs(1), *small_jobs(1, "nvcc")]

    async def dump(folder: Path, executor: RayExecutor | None) -> dict[str, set[str]]:
        async with Engine(arch=ARCH, cache=False, dump_dir=folder, executor=executor) as e:
            results = await e.compile_many(jobs)
        assert all(r.ok for r in results)
        return {
            job.name: {p.name for p in (r.dump_dir or Path()).iterdir()}
            for job, r in zip(jobs, results, strict=True)
        }

    remote = await dump(tmp_path / "ray", RayExecutor())
    local = await dump(tmp_path / "local", None)
    assert remote == local
    assert any(name.endswith(".ptx") for name in remote["nvcc_0"])  # nvcc's intermediates


# -- faults ----------------------------------------------------------------------------


async def test_killing_a_nodes_actors_mid_sweep_loses_no_job(cluster: RayCluster) -> None:
    jobs = [CompileJob(slow_kernel(2500), name=f"slow_{i}") for i in range(6)]
    async with Engine(arch=ARCH, cache=False, executor=RayExecutor()) as engine:

        async def kill_the_worker_nodes_actors() -> None:
            await wait_until(lambda: len(compiling_actors()) == 2)
            victims = actor_processes(cluster.worker)
            assert victims
            for victim in victims:
                victim.send_signal(signal.SIGKILL)

        async with anyio.create_task_group() as tg:
            tg.start_soon(kill_the_worker_nodes_actors)
            results = await engine.compile_many(jobs)
        # The node still has its CPU: the lost actor was replaced there.
        await wait_until(lambda: engine.statistics().workers == 2)
    assert all(r.ok for r in results), [r.error for r in results]
    assert len({r.binary for r in results}) == 1  # one source: retried jobs give the same bytes


async def test_losing_a_node_mid_sweep_loses_no_job(cluster: RayCluster) -> None:
    jobs = [CompileJob(slow_kernel(2500), name=f"slow_{i}") for i in range(6)]
    # Long enough for three actors to start on a loaded machine; a replacement that
    # cannot be placed is given up after it too (the wait for two slots below covers it).
    executor = RayExecutor(startup_timeout=20)
    with cluster.extra_node() as extra:
        results = await _lose_a_busy_node(cluster, extra, jobs, executor)
    assert all(r.ok for r in results), [r.error for r in results]


async def _lose_a_busy_node(
    cluster: RayCluster, extra: Any, jobs: list[CompileJob], executor: RayExecutor
) -> list[CompileResult]:
    async with Engine(arch=ARCH, cache=False, executor=executor) as engine:
        assert engine.statistics().workers == 3
        assert engine.slots == dict.fromkeys(backend_names(), 3)  # an actor runs any

        async def remove_a_busy_node() -> None:
            await wait_until(lambda: len(compiling_actors()) == 3)
            cluster.remove_node(extra)

        async with anyio.create_task_group() as tg:
            tg.start_soon(remove_a_busy_node)
            results = await engine.compile_many(jobs)
        # Nowhere to put a replacement: the other CPUs hold the engine's actors, and
        # the engine's slots follow its actors (jobs wait in its longest-first queue).
        assert engine.statistics().workers == 2
        await wait_until(lambda: engine.slots == dict.fromkeys(backend_names(), 2), within=60)
    return results


async def test_a_job_whose_actors_are_all_lost_is_worker_crashed(cluster: RayCluster) -> None:
    async with Engine(arch=ARCH, cache=False, executor=RayExecutor(retries=0)) as engine:

        async def kill_the_one_compiling() -> None:
            await wait_until(lambda: len(compiling_actors()) == 1)
            compiling_actors()[0].send_signal(signal.SIGKILL)

        async with anyio.create_task_group() as tg:
            tg.start_soon(kill_the_one_compiling)
            result = await engine.compile(CompileJob(slow_kernel(), name="victim"))
        after = await engine.compile(CompileJob(scale_kernel(3.0)))
    assert isinstance(result.error, WorkerCrashed)
    assert "lost 1 Ray compile actor" in str(result.error)
    assert after.ok  # the engine goes on with the other actor (and a replacement)


async def test_a_timeout_stops_the_compile_on_its_actor(cluster: RayCluster) -> None:
    async with Engine(arch=ARCH, cache=False, executor=RayExecutor()) as engine:
        result = await engine.compile(CompileJob(slow_kernel(), timeout=1.0))
        # The actor is free again at once: both actors take the next two jobs.
        after = await engine.compile_many(small_jobs(2))
    assert isinstance(result.error, CompileTimeout)
    # Either message is the actor's own NVRTC backend's: the client only waited.
    assert "NVRTC compile cancelled" in str(result.error) or "NVRTC did not stop" in str(
        result.error
    )
    assert all(r.ok for r in after)


@needs_nvcc
async def test_a_cancelled_job_is_stopped_on_the_cluster(cluster: RayCluster) -> None:
    def nvcc_below_actors() -> list[psutil.Process]:
        found = []
        for actor in actor_processes():
            try:
                found += actor.children(recursive=True)
            except psutil.Error:
                pass
        return found

    async with Engine(arch=ARCH, cache=False, executor=RayExecutor()) as engine:
        with anyio.move_on_after(60) as scope:
            async with anyio.create_task_group() as tg:

                async def cancel_once_nvcc_runs() -> None:
                    await wait_until(lambda: bool(nvcc_below_actors()))
                    scope.cancel()

                tg.start_soon(cancel_once_nvcc_runs)
                await engine.compile(CompileJob(slow_kernel(), backend="nvcc", name="doomed"))
        assert scope.cancelled_caught
        await wait_until(lambda: not nvcc_below_actors(), within=15)
        assert all(r.ok for r in await engine.compile_many(small_jobs(2)))


async def test_closing_leaves_nothing_running_on_the_cluster(cluster: RayCluster) -> None:
    async with Engine(arch=ARCH, cache=False, executor=RayExecutor()) as engine:
        await engine.compile_many(small_jobs(2))
        pids = [p.pid for p in actor_processes()]
        assert len(pids) == 2 and cluster.free_cpus() == 0
    await all_actors_gone(pids)
    assert cluster.free_cpus() == 2


async def test_an_engine_cancelled_while_its_actors_start_leaves_none(
    cluster: RayCluster,
) -> None:
    # Cancelled as soon as actor processes appear: mostly while the engine waits for
    # them to start (its thread then kills them), else just after (a normal close).
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:

            async def cancel_when_actors_appear() -> None:
                await wait_until(lambda: bool(actor_processes()))
                scope.cancel()

            tg.start_soon(cancel_when_actors_appear)
            async with Engine(arch=ARCH, cache=False, executor=RayExecutor()):
                await anyio.sleep_forever()
    assert scope.cancelled_caught
    await wait_until(lambda: not actor_processes() and cluster.free_cpus() == 2, within=20)


# -- the cluster's toolkit, and clusters that cannot be used ---------------------------


async def test_actors_with_another_toolkit_are_refused(cluster: RayCluster) -> None:
    other = replace(find_toolkit(), nvcc_version="12.0.0")
    with pytest.raises(ClusterError, match="another toolkit"):
        async with Engine(arch=ARCH, toolkit=other, executor=RayExecutor()):
            pass
    await wait_until(lambda: cluster.free_cpus() == 2)  # the refused actors were killed


async def test_an_actor_refuses_a_job_keyed_for_another_compiler() -> None:
    actor = CompileActor()  # the class the cluster runs, here in this process
    job = CompileJob(scale_kernel(), arch=ARCH)
    prepared = NvrtcBackend(actor.toolkit).prepare(job, BackendOptions(ARCH))
    refused = await actor.compile(prepared, "nvrtc 11.8 elsewhere")
    assert refused.status == "internal" and refused.binary is None
    assert "refused" in refused.message and "nvrtc 11.8 elsewhere" in refused.message
    accepted = await actor.compile(prepared, actor.identity["nvrtc"])
    assert accepted.status == "ok" and accepted.binary


class _Method:
    def __init__(self, answer: object) -> None:
        self.answer = answer

    def remote(self, *args: object) -> Any:
        future: Future[object] = Future()
        if isinstance(self.answer, BaseException):
            future.set_exception(self.answer)
        else:
            future.set_result(self.answer)
        return SimpleNamespace(future=lambda: future)


async def test_an_actor_whose_code_raised_is_given_back_once() -> None:
    # The pool's bookkeeping alone, on stand-in actor handles (no cluster): an actor
    # whose code raised goes back to the free list once, not twice (twice, it would be
    # handed two jobs at once), and its job gets an internal error.
    ray = pytest.importorskip("ray")
    raised = ray.exceptions.RayTaskError("compile", "Traceback: boom", ValueError("boom"))
    toolkit = find_toolkit()
    pool = ActorPool(
        address=None,
        actors=1,
        retries=0,
        startup_timeout=1,
        identity=toolkit_identity(toolkit),
    )
    broken = Actor(SimpleNamespace(compile=_Method(raised)), 1, "here")
    pool._live.add(broken)
    pool._free.append(broken)
    prepared = NvrtcBackend(toolkit).prepare(CompileJob(scale_kernel()), BackendOptions(ARCH))
    out = await pool.run(prepared)
    assert out.status == "internal" and "boom" in out.message
    assert pool._free == [broken]


class _Pending:
    """A stand-in actor method whose answer the test gives (``future``)."""

    def __init__(self) -> None:
        self.future: Future[object] = Future()

    def remote(self, *args: object) -> Any:
        return SimpleNamespace(future=lambda: self.future)


async def test_warm_up_gives_each_actor_back_when_its_own_warm_up_ended() -> None:
    # The pool's bookkeeping alone, on stand-in actor handles (no cluster): an actor
    # that died is lost, not handed out again; one still warming stays off the free
    # list until its own warm-up has ended (another actor's failure does not free it).
    ray = pytest.importorskip("ray")
    pool = ActorPool(
        address=None,
        actors=2,
        retries=0,
        startup_timeout=1,
        identity=toolkit_identity(find_toolkit()),
    )
    dead = Actor(SimpleNamespace(warm_up=_Method(ray.exceptions.RayActorError())), 1, "here")
    warming = _Pending()
    slow = Actor(SimpleNamespace(warm_up=warming), 2, "here")
    pool._live |= {dead, slow}
    pool._free += [dead, slow]
    warmed = anyio.Event()

    async def warm_up() -> None:
        await pool.warm_up()
        warmed.set()

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(warm_up)
            await wait_until(lambda: dead not in pool._live or warmed.is_set())
            assert pool._free == [] and pool.size_alive == 1 and not warmed.is_set()
            warming.future.set_result(None)
    assert pool._free == [slow] and pool.size_alive == 1


async def test_warm_up_loses_a_dead_actor_and_leaves_a_busy_one_alone(
    cluster: RayCluster,
) -> None:
    # No retries: a job handed to a dead actor would fail (WorkerCrashed).
    async with Engine(arch=ARCH, cache=False, executor=RayExecutor(retries=0)) as engine:
        busy_results: list[CompileResult] = []

        async def compile_slow() -> None:
            job = CompileJob(slow_kernel(15000), name="busy")
            busy_results.append(await engine.compile(job))

        async with anyio.create_task_group() as tg:
            tg.start_soon(compile_slow)
            await wait_until(lambda: len(compiling_actors()) == 1)
            busy = compiling_actors()[0].pid
            idle = next(p for p in actor_processes() if p.pid != busy)
            idle.kill()  # dies while idle: the pool does not know yet
            await wait_until(lambda: not psutil.pid_exists(idle.pid))
            await engine.warm_up()  # warms the dead one (lost), not the busy one
            after = await engine.compile_many(small_jobs(2))
            await wait_until(lambda: engine.statistics().workers == 2)  # a replacement
        assert [r.ok for r in after] == [True, True], [r.error for r in after]
        assert busy_results[0].ok and psutil.pid_exists(busy)


async def test_an_actor_starts_its_nvrtc_once_across_calls() -> None:
    actor = CompileActor()  # the class the cluster runs, here in this process
    await actor.warm_up()
    backend = NvrtcBackend(actor.toolkit)
    for i in range(3):
        prepared = backend.prepare(CompileJob(scale_kernel(float(i))), BackendOptions(ARCH))
        out = await actor.compile(prepared, actor.identity["nvrtc"])
        assert out.status == "ok"
    assert (await actor.describe())["starts"] == {"nvrtc": 1}


async def test_without_ray_installed_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    # What to install, named as it exists: Ray itself, or the checkout's extra (asynccomp
    # is not on PyPI: an extra of it by name is nothing pip can install).
    needed = r"pip install ray \(in asynccomp's checkout: pip install '\.\[ray\]'\)"
    with pytest.raises(ClusterError, match=needed):
        async with Engine(arch=ARCH, executor=RayExecutor()):
            pass
    with pytest.warns(ClusterWarning, match="compiling with local workers"):
        async with Engine(arch=ARCH, executor=RayExecutor(fallback=True)) as engine:
            result = await engine.compile(CompileJob(scale_kernel()))
    assert result.ok and not engine.on_cluster


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("actors", 0),
        ("retries", -1),
        ("address", ""),
        ("startup_timeout", float("nan")),
        ("fallback", "yes"),
    ],
)
def test_bad_executor_settings_are_settings_errors(field: str, value: object) -> None:
    with pytest.raises(SettingsError, match=field):
        RayExecutor(**{field: value})  # type: ignore[arg-type]
    with pytest.raises(SettingsError, match="executor"):
        Engine(executor="ray://x:1")  # type: ignore[arg-type]
    with pytest.raises(SettingsError, match="belong to the server"):
        Engine(server="auto", executor=RayExecutor())


# -- the command line and the server ---------------------------------------------------


def asynccomp(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "asynccomp", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
        env={**os.environ, "ASYNCCOMP_SERVER": "off"},
    )


def test_compile_on_the_cluster_from_the_command_line(cluster: RayCluster, tmp_path: Path) -> None:
    (tmp_path / "a.cu").write_text(scale_kernel(1.0))
    (tmp_path / "b.cu").write_text(scale_kernel(2.0))
    done = asynccomp(
        "compile", "--ray", cluster.address, "--arch", ARCH, "a.cu", "b.cu", "--out", "bin",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"on Ray at {cluster.address}" in done.stdout, done.stdout  # its summary says
    assert (tmp_path / "bin" / "a.cubin").stat().st_size > 0
    assert (tmp_path / "bin" / "b.cubin").stat().st_size > 0


@needs_ray
def test_an_unreachable_cluster_is_an_error_or_a_fallback(tmp_path: Path) -> None:
    (tmp_path / "a.cu").write_text(scale_kernel(1.0))
    refused = asynccomp("compile", "--ray", "127.0.0.1:1", "--arch", ARCH, "a.cu", cwd=tmp_path)
    assert refused.returncode == 2
    assert "could not reach the Ray cluster at '127.0.0.1:1'" in refused.stderr
    fell_back = asynccomp(
        "compile", "--ray", "127.0.0.1:1", "--ray-fallback", "--arch", ARCH, "a.cu", cwd=tmp_path
    )
    assert fell_back.returncode == 0, fell_back.stderr
    assert "compiling with local workers" in fell_back.stderr
    lonely = asynccomp("compile", "--ray-fallback", "--arch", ARCH, "a.cu", cwd=tmp_path)
    assert lonely.returncode == 2 and "--ray-fallback goes with --ray" in lonely.stderr


async def test_ray_actors_sets_how_many_actors_start(cluster: RayCluster) -> None:
    """``--ray-actors 1`` on a cluster that offers 2 CPUs: one actor, not one per CPU."""
    args = ("--ray", cluster.address, "--ray-actors", "1", "--idle-timeout", "0")
    with server_folder() as folder, running_server(folder, *args) as (_, paths):
        async with Engine(arch=ARCH, server=paths.socket) as client:
            results = await client.compile_many(small_jobs(2))
        said = await anyio.to_thread.run_sync(status, paths.socket)
        assert said["executor"] == "ray" and said["workers"] == 1
        assert len(actor_processes()) == 1
    assert all(r.ok for r in results)


async def test_the_compile_server_fronts_the_cluster(cluster: RayCluster) -> None:
    args = ("--ray", cluster.address, "--idle-timeout", "0")
    with server_folder() as folder, running_server(folder, *args) as (server, paths):
        async with Engine(arch=ARCH, server=paths.socket) as client:
            results = await client.compile_many(small_jobs(2))
        said = await anyio.to_thread.run_sync(status, paths.socket)
        actors = [p.pid for p in actor_processes()]
        assert said["executor"] == "ray" and said["workers"] == 2 and len(actors) == 2
    # The server was killed: Ray ends the actors of a driver that died.
    assert all(r.ok for r in results)
    await all_actors_gone(actors)
    assert server.returncode is not None


def test_import_asynccomp_ray_needs_no_ray() -> None:
    code = (
        "import sys; sys.modules['ray'] = None; import asynccomp.ray, asynccomp.cli; "
        "print(asynccomp.ray.RayExecutor())"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "RayExecutor(address=None" in done.stdout
