"""A start that fails half way takes down everything it had started: real NVRTC worker
processes in process, a real connection to a real compile server."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.abc
import anyio.to_thread
import pytest

from asynccomp import CompileJob, Engine, InvalidJob
from asynccomp import server as server_api
from asynccomp.backends import BackendOptions, BackendOutput, CompilerBackend, PreparedCompile
from asynccomp.toolkit import Toolkit

from .kernels import ARCH
from .processes import nvrtc_workers
from .servers import running_server, server_folder


class _StartsThenFails(CompilerBackend):
    """A backend whose start warms another (its NVRTC worker processes are up), then
    fails: what a start that fails after the workers were made leaves behind."""

    def __init__(self, toolkit: Toolkit, warmed: CompilerBackend) -> None:
        super().__init__(toolkit)
        self.warmed = warmed
        self.workers_seen = 0

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:
        await self.warmed.warm_up()
        self.workers_seen = len(nvrtc_workers())
        raise RuntimeError("this start fails after the workers started")

    def prepare(self, job: CompileJob, options: BackendOptions) -> PreparedCompile:
        raise AssertionError("never started")  # pragma: no cover

    async def run(self, prepared: PreparedCompile) -> BackendOutput:
        raise AssertionError("never started")  # pragma: no cover


class _FailingEngine(Engine):
    failing: _StartsThenFails | None = None

    def _make_backends(self, toolkit: Toolkit) -> dict[str, CompilerBackend]:
        backends = super()._make_backends(toolkit)
        self.failing = _StartsThenFails(toolkit, backends["nvrtc"])
        return {**backends, "failing": self.failing}


async def test_a_start_that_fails_after_the_workers_started_leaves_none() -> None:
    engine = _FailingEngine(arch=ARCH, nvrtc_workers=2, nvrtc_mode="processes", cache=False)
    with pytest.raises(RuntimeError, match="after the workers started"):
        async with engine:
            pass
    assert engine.failing is not None and engine.failing.workers_seen == 2
    assert nvrtc_workers() == []
    assert engine.state.name == "NEW" and engine.statistics().workers == 0


@pytest.fixture
def server_dir() -> Iterator[Path]:
    with server_folder() as folder:
        yield folder


async def test_a_start_that_fails_after_connecting_leaves_no_client_on_the_server(
    server_dir: Path,
) -> None:
    """An architecture the server's compilers lack is refused once the client has
    connected (the welcome names the toolkit): the connection and its reader go."""
    with running_server(server_dir) as (_, paths):
        for _ in range(3):
            with pytest.raises(InvalidJob, match="sm_999"):
                async with Engine(arch="sm_999", server=str(paths.socket)):
                    pass

        async def clients() -> int:
            status = await anyio.to_thread.run_sync(server_api.status, paths.socket)
            return int(status["clients"])

        with anyio.fail_after(30):
            while await clients():  # noqa: ASYNC110 - a counter: the server signals nothing
                await anyio.sleep(0.05)
        async with Engine(arch=ARCH, server=str(paths.socket)) as engine:
            assert engine.where.startswith("on the compile server")
            assert await clients() == 1
