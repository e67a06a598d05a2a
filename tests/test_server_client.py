"""asynccomp.server.ServerClient used directly, with public types only, as a program
would use any asynccomp.runner.Runner: a real server on a real socket, real NVRTC.
Requests in flight together on one connection (a status during a batch, a warm-up,
two calls), a call nobody reads (the status only comes back), a cancelled call, and the
largest source any engine takes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path

import anyio
import pytest

from asynccomp import CompileJob, InvalidJob
from asynccomp.backends import BackendOptions, NvrtcBackend, PreparedCompile
from asynccomp.job import MAX_SOURCE_CHARS
from asynccomp.runner import CompileRequest, Outcome
from asynccomp.server import ServerClient

from .kernels import ARCH, scale_kernel, slow_kernel
from .servers import running_server, server_folder
from .test_cli import asynccomp as command_line


class Told:
    """A RunEvents that keeps what it is told (and says when a job has started)."""

    def __init__(self) -> None:
        self.started_jobs: list[int] = []
        self.outcomes: dict[int, Outcome] = {}
        self.first_start = anyio.Event()

    def started(self, index: int) -> None:
        self.started_jobs.append(index)
        self.first_start.set()

    def finished(self, index: int, outcome: Outcome) -> None:
        assert index not in self.outcomes, "an outcome twice"
        self.outcomes[index] = outcome


async def _chunks(*chunks: Sequence[CompileRequest]) -> AsyncIterator[Sequence[CompileRequest]]:
    for chunk in chunks:
        yield chunk


def _rendered(client: ServerClient, *jobs: CompileJob) -> list[CompileRequest]:
    """The jobs rendered for the server's toolkit (its welcome names it), as an engine
    renders them."""
    nvrtc = NvrtcBackend(client.toolkit)
    options = BackendOptions(arch=ARCH)
    return [CompileRequest(i, nvrtc.prepare(job, options)) for i, job in enumerate(jobs)]


@pytest.fixture
def socket_path() -> Iterator[Path]:
    with server_folder() as folder, running_server(folder) as (_, paths):
        yield paths.socket


async def test_a_call_status_and_warm_up_at_once_on_one_connection(socket_path: Path) -> None:
    client = ServerClient(socket_path)
    async with anyio.create_task_group() as tg:
        await client.start(tg)
        assert client.where.startswith("on the compile server (pid")
        assert client.slots()["nvrtc"] >= 1
        # Slow enough to outlast a warm-up that starts workers on a loaded machine.
        slow, quick = _rendered(client, CompileJob(slow_kernel(20000)), CompileJob(scale_kernel()))
        events = Told()
        tg.start_soon(client.run, _chunks([slow]), events)
        with anyio.fail_after(120):
            await events.first_start.wait()
            # The batch runs; a status, a warm-up and a second call share its connection.
            during = await client.status()
            await client.warm_up()
            others = Told()
            await client.run(_chunks([CompileRequest(1, quick.prepared)]), others)
        assert (during["running"], during["requests"], during["clients"]) == (1, 1, 0)
        assert others.outcomes[1].output.status == "ok" and 0 not in events.outcomes
        assert client.workers() == client.slots()["nvrtc"]  # warm: every worker up
        await wait_for_outcome(events, 0)
        await client.aclose()
    outcome = events.outcomes[0]
    assert (outcome.answer, outcome.output.status) == ("compiled", "ok")
    assert outcome.output.binary is not None and outcome.output.binary.startswith(b"\x7fELF")
    assert events.started_jobs == [0] and outcome.filename == slow.prepared.filename


async def test_a_warm_up_answers_after_the_worker_count_it_made(socket_path: Path) -> None:
    """The count of workers comes in Workers messages and the warm-up's answer in
    another: the server sends the count first, so a client's statistics show every
    worker as soon as warm_up() returns (the pool tells the server a loop turn later;
    answered before that, a client saw 1 worker of 2)."""
    client = ServerClient(socket_path)
    async with anyio.create_task_group() as tg:
        await client.start(tg)
        assert client.workers() == 0  # a fresh server starts workers as jobs need them
        with anyio.fail_after(120):
            await client.warm_up()
        assert client.workers() == client.slots()["nvrtc"]
        await client.aclose()


async def wait_for_outcome(events: Told, index: int) -> None:
    with anyio.fail_after(120):
        while index not in events.outcomes:  # noqa: ASYNC110 - the runner's events, plain
            await anyio.sleep(0.02)


async def test_a_call_nobody_reads_gets_the_status_only(socket_path: Path) -> None:
    """want=False (a prefetch): each outcome says how it went, with no log and no
    binary on the wire; a call that reads gets both, the second time from the cache."""
    client = ServerClient(socket_path)
    async with anyio.create_task_group() as tg:
        await client.start(tg)
        requests = _rendered(client, CompileJob(scale_kernel(3.5)), CompileJob(scale_kernel(4.5)))
        unread, read = Told(), Told()
        await client.run(_chunks(requests), unread, want=False)
        await client.run(_chunks(requests), read)
        await client.aclose()
    for outcome in unread.outcomes.values():
        assert (outcome.answer, outcome.output.status) == ("compiled", "ok")
        assert (outcome.output.binary, outcome.output.log) == (None, "")
    for outcome in read.outcomes.values():
        assert outcome.answer == "cache" and outcome.output.binary is not None
        assert "registers" in outcome.output.log  # ptxas' report, kept in the cache


async def test_a_cancelled_call_stops_on_the_server(socket_path: Path) -> None:
    client = ServerClient(socket_path)
    async with anyio.create_task_group() as tg:
        await client.start(tg)
        (slow,) = _rendered(client, CompileJob(slow_kernel(30002)))
        events = Told()
        with anyio.move_on_after(120) as scope:

            async def cancel_once_started() -> None:
                await events.first_start.wait()
                scope.cancel()

            tg.start_soon(cancel_once_started)
            await client.run(_chunks([slow]), events)
        assert scope.cancelled_caught and events.started_jobs == [0]
        assert events.outcomes == {}
        # The server ends the compile, then the call's request: wait for both (the
        # deadline fails the test if either stays).
        with anyio.fail_after(30):
            while True:
                status = await client.status()
                if (status["running"], status["queued"], status["requests"]) == (0, 0, 0):
                    break
                await anyio.sleep(0.05)
        assert (status["running"], status["queued"], status["requests"]) == (0, 0, 0)
        await client.aclose()


@pytest.mark.slow
async def test_a_source_over_the_limit_is_refused_at_every_door(
    socket_path: Path, tmp_path: Path
) -> None:
    """A source over MAX_SOURCE_CHARS is refused at every door: as a CompileJob is made
    (the only way into an Engine or a SyncEngine, in process, on a server or on Ray),
    by the TVM facade and the command line (InvalidJob, exit 2), and by the server
    itself for a client that renders its own (the wire's limit is in bytes)."""
    import asynccomp.tvm

    over = "x" * (MAX_SOURCE_CHARS + 1)
    said = f"over {MAX_SOURCE_CHARS} characters"
    with pytest.raises(InvalidJob, match=said):
        CompileJob(over)
    with pytest.raises(InvalidJob, match=said):
        asynccomp.tvm.compile_cuda(over, "ptx", arch=ARCH)
    big = tmp_path / "big.cu"
    big.write_text(over)
    done = command_line("compile", str(big), "--arch", ARCH, cache=tmp_path / "cache")
    assert done.returncode == 2 and said in done.stderr, done.stderr
    big.unlink()
    assert len(CompileJob("x" * MAX_SOURCE_CHARS).source) == MAX_SOURCE_CHARS  # the limit is in
    client = ServerClient(socket_path)
    async with anyio.create_task_group() as tg:
        await client.start(tg)
        prepared = PreparedCompile(
            "nvrtc", "cubin", ARCH, "x" * (MAX_SOURCE_CHARS + 1), "big.cu", ()
        )
        events = Told()
        await client.run(_chunks([CompileRequest(0, prepared)]), events)
        after = Told()
        await client.run(_chunks(_rendered(client, CompileJob(scale_kernel(6.5)))), after)
        await client.aclose()
    refused = events.outcomes[0].output
    assert refused.status == "internal" and f"over {MAX_SOURCE_CHARS} characters" in refused.message
    assert after.outcomes[0].output.status == "ok"  # the connection goes on
