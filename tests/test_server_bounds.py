"""Nothing held forever, for real: a client that reads nothing stops being read and is
dropped at the write deadline (the server keeps serving others), a client gives up on a
server that stops answering (at hello, or with a call waiting) with a reason that says
so, and a protocol error after hello is an error frame and one log line, on both sides
without asyncio's "Future.set_result" errors."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from asynccomp import CompileJob, Engine, ServerError, ServerLost
from asynccomp import server as server_api
from asynccomp._version import __version__
from asynccomp.runner import CompileRequest
from asynccomp.server import (
    Server,
    ServerClient,
    ServerPaths,
    _client,
    _connect,
    server_identity,
    server_paths,
)
from asynccomp.server._protocol import (
    PROTOCOL,
    Error,
    Hello,
    Results,
    Status,
    Welcome,
    Workers,
    parse,
    send_form,
)
from asynccomp.server._requests import MAX_WAITING_JOBS, in_flight_limit
from asynccomp.server._session import MAX_UNSENT_ANSWERS
from asynccomp.server._wire import encode, read_message

from .kernels import ARCH, scale_kernel, slow_kernel
from .processes import wait_until
from .servers import raw_client, raw_receive, running_server, server_folder
from .test_server_client import _rendered

#: Status requests a client that reads nothing sends at most (unbounded, the server
#: would read them all and hold every answer).
FLOOD = 20_000
#: Jobs in one call whose answers are never read (far more than socket buffers hold).
JOBS = 600


@pytest.fixture
def server_dir() -> Iterator[Path]:
    with server_folder() as folder:
        yield folder


@contextlib.contextmanager
def stopped(pid: int) -> Iterator[None]:
    """Process ``pid`` stopped (SIGSTOP) in the block, continued after, whatever happens."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def _flood(sock: socket.socket, blocked_after: float) -> int:
    """Send status requests and read nothing, until the server stops reading them (a
    send blocked for ``blocked_after`` seconds) or FLOOD went out; how many went."""
    request = b"".join(encode(*send_form(Status(7))))
    sock.settimeout(blocked_after)
    sent = 0
    with contextlib.suppress(TimeoutError):
        while sent < FLOOD:
            sock.sendall(request)
            sent += 1
    return sent


# -- a client that reads nothing -------------------------------------------------------------


def test_a_client_that_reads_nothing_has_its_requests_read_no_more(server_dir: Path) -> None:
    """The server stops reading a client's requests while its answers wait unread: the
    answers it holds for that client stay under the bound, and another client is
    served meanwhile. (Unbounded, 400 cached answers with a 2.3 MB log each took a
    server from 97 to 956 MB.)"""
    with running_server(server_dir) as (_, paths), raw_client(paths) as greedy:
        sent = _flood(greedy, blocked_after=5)
        status = server_api.status(paths.socket)  # another client, served
        assert sent < FLOOD, "the server read every request of a client that reads nothing"
        assert status["clients"] == 1 and 0 < status["unsent"] <= MAX_UNSENT_ANSWERS + 1
        with raw_client(paths) as other:  # and still served, the first still connected
            other.sendall(b"".join(encode(*send_form(Status(1)))))
            # Still under the bound: a request the server had half read when the first
            # status was taken may have been answered since (64, then 65, in one CI run).
            unsent = raw_receive(other).status["unsent"]
            assert status["unsent"] <= unsent <= MAX_UNSENT_ANSWERS + 1


async def test_a_call_whose_answers_are_not_read_is_fed_to_the_scheduler_no_further(
    server_dir: Path,
) -> None:
    """One call of many jobs (all read at once: a few messages), its answers never
    read: the server hands its jobs to the scheduler only while the answers waiting for
    it are under the bound, and only so many at once, so it holds no more than the bound
    and one window of jobs."""
    with running_server(server_dir) as (_, paths):
        client = ServerClient(paths.socket)
        async with anyio.create_task_group() as tg:
            await client.start(tg)
            (first,) = _rendered(client, CompileJob(scale_kernel(6.5)))
            await client.aclose()
        requests = [CompileRequest(i, first.prepared) for i in range(JOBS)]
        with raw_client(paths) as greedy:
            for message, blobs in _client._packed(1, True, requests, False, True):
                greedy.sendall(b"".join(encode(*send_form(message, blobs))))
            await _status_until(paths, lambda s: s["unsent"] >= MAX_UNSENT_ANSWERS)
            # What was handed to the scheduler has ended: nothing more is coming.
            status = await _status_until(paths, lambda s: s["running"] + s["queued"] == 0)
    limit = in_flight_limit(status["settings"]["slots"])
    assert MAX_UNSENT_ANSWERS + limit < JOBS
    assert MAX_UNSENT_ANSWERS <= status["unsent"] <= MAX_UNSENT_ANSWERS + limit + 2, status


async def _status_until(
    paths: ServerPaths, predicate: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """The server's status once ``predicate`` holds for it (asked again and again)."""
    with anyio.fail_after(120):
        while True:
            answer = await _connect.request(paths.socket, Status(1))
            if predicate(answer.status):
                return dict(answer.status)
            await anyio.sleep(0.05)


async def test_a_client_that_reads_nothing_is_dropped_at_the_write_deadline(
    server_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    monkeypatch.chdir(tmp_path)  # the server moves into its empty folder; undone after
    paths = server_paths(server_dir)
    # A real server (socket, sessions, scheduler) in the test's own process, with the
    # deadline for a client that reads nothing as short as the test makes it.
    server = Server(paths, idle_timeout=0, write_timeout=1.0)
    caplog.set_level(logging.WARNING, "asynccomp.server")
    # The lock file names this process: gone after, or the folder's cleanup kills it.
    monkeypatch.setattr(server, "_retire", _retired(server))
    async with anyio.create_task_group() as tg:
        await tg.start(server.serve)
        greedy = await anyio.connect_unix(paths.socket)
        for frame in encode(*send_form(Hello(PROTOCOL, __version__, os.getpid()))):
            await greedy.send(frame)
        welcome = await read_message(BufferedByteReceiveStream(greedy))
        assert welcome is not None and isinstance(parse(welcome), Welcome)
        request = b"".join(encode(*send_form(Status(3))))

        async def flood() -> None:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                while True:
                    await greedy.send(request)

        tg.start_soon(flood)
        await wait_until(lambda: server.status()["unsent"] >= MAX_UNSENT_ANSWERS)
        # It reads nothing: dropped at the deadline, what waited for it freed.
        await wait_until(lambda: server.status()["clients"] == 0)
        assert server.status()["unsent"] == 0
        async with Engine(arch=ARCH, server=str(paths.socket)) as engine:
            assert (await engine.compile(CompileJob(scale_kernel(2.5)))).ok
        await greedy.aclose()
        server.stop()
    dropped = [r.getMessage() for r in caplog.records if "read nothing" in r.getMessage()]
    assert len(dropped) == 1 and "dropped" in dropped[0], dropped


def _retired(server: Server) -> Any:
    retire = server._retire

    def retire_and_unlock() -> None:
        retire()
        server.paths.lock.unlink(missing_ok=True)

    return retire_and_unlock


# -- a server that stops answering -----------------------------------------------------------


async def test_a_stopped_server_at_hello_is_a_server_error_saying_it_did_not_answer(
    server_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_connect, "ANSWER_TIMEOUT", 2.0)
    with running_server(server_dir) as (process, paths), stopped(process.pid):
        client = ServerClient(paths.socket)
        async with anyio.create_task_group() as tg:
            with pytest.raises(ServerError) as raised, anyio.fail_after(60):
                await client.start(tg)
    assert "did not answer hello within 2 s" in str(raised.value)


async def test_a_job_with_a_timeout_on_a_server_that_stops_answering_ends_server_lost(
    server_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call waits on a stopped server at most its silence limit (the grace past a
    job's timeout): then the job ends ServerLost saying why."""
    monkeypatch.setattr(_client, "SILENCE_LIMIT", 3.0)
    with running_server(server_dir) as (process, paths):
        async with Engine(arch=ARCH, server=str(paths.socket)) as engine:
            assert (await engine.compile(CompileJob(scale_kernel(1.5)))).ok
            with stopped(process.pid), anyio.fail_after(120):
                result = await engine.compile(CompileJob(slow_kernel(3001), timeout=3))
    assert isinstance(result.error, ServerLost), result.error
    assert "said nothing for" in str(result.error) and "stopped or hung" in str(result.error)


async def test_a_long_compile_on_a_live_server_is_not_taken_for_silence(
    server_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server busy with one long compile keeps the client told (keepalives): a
    silence limit shorter than the compile does not lose it."""
    monkeypatch.setattr(_client, "SILENCE_LIMIT", 12.0)
    with running_server(server_dir) as (_, paths):
        async with Engine(arch=ARCH, server=str(paths.socket)) as engine:
            result = await engine.compile(CompileJob(slow_kernel(30003)))
    assert result.ok, result.error


# -- a protocol error after hello ------------------------------------------------------------


def test_a_protocol_error_after_hello_is_an_error_frame_and_one_log_line(
    server_dir: Path, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    with running_server(server_dir, log=log) as (_, paths), raw_client(paths) as sock:
        sock.sendall(b"\x00\x00\x00\x00")  # a frame of 0 bytes: not the protocol
        said = raw_receive(sock)
        assert isinstance(said, Error) and said.fatal and said.id is None
        assert said.message.startswith("protocol error: a frame of 0 bytes")
        assert sock.recv(1) == b""  # then the connection closes
        status = server_api.status(paths.socket)  # the server goes on
        assert status["clients"] == 0
    text = log.read_text()
    assert "broke the protocol: a frame of 0 bytes" in text, text
    assert "Traceback" not in text and "a connection failed" not in text, text


@pytest.mark.asyncio_only  # asyncio's own exception handler
async def test_closing_a_client_while_an_answer_arrives_leaves_asyncio_nothing_to_report(
    server_dir: Path,
) -> None:
    """``aclose`` in the loop turn where the server's answer makes the socket readable:
    closing the socket under the reader's feet made asyncio report "Exception in
    callback Future.set_result(None)" (InvalidStateError: the readiness callback set a
    future the close had already set). A peer the test drives (it says when the answer
    arrives) stands for the server."""
    path = server_dir / "peer.sock"
    identity = await anyio.to_thread.run_sync(server_identity)
    welcome = Welcome(PROTOCOL, __version__, os.getpid(), os.getuid(), identity, {}, {}, 0, {})
    reported: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: reported.append(context))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen()
        try:
            accepted: list[socket.socket] = []
            welcomed = anyio.Event()

            async def accept() -> None:
                accepted.append(await anyio.to_thread.run_sync(_welcome_one, listener, welcome))
                welcomed.set()

            client = ServerClient(path)
            async with anyio.create_task_group() as tg:
                tg.start_soon(accept)
                await client.start(tg)
                with anyio.fail_after(60):  # the peer's thread is back (a loaded machine)
                    await welcomed.wait()
                for _ in range(5):  # the reader is waiting for data
                    await anyio.lowlevel.checkpoint()
                with accepted[0] as peer:
                    peer.sendall(b"".join(encode(*send_form(Workers(2)))))
                    await anyio.lowlevel.checkpoint()  # back with the socket readable
                    await client.aclose()
            for _ in range(5):  # asyncio's callbacks of that turn have run
                await anyio.lowlevel.checkpoint()
        finally:
            loop.set_exception_handler(None)
    assert reported == []


def _welcome_one(listener: socket.socket, welcome: Welcome) -> socket.socket:
    """Accept one client on ``listener``, read its hello, welcome it."""
    sock, _ = listener.accept()
    sock.settimeout(60)
    assert isinstance(raw_receive(sock), Hello)
    sock.sendall(b"".join(encode(*send_form(welcome))))
    return sock


# 20,000 dependent statements from a few hundred bytes of source (the preprocessor writes
# them): a compile of many seconds, for many jobs that cost the wire little.
_SLOW_AND_SMALL = (
    "#define A a = a * 1.0001f + __sinf(a);\n"
    "#define B A A A A A A A A A A\n#define C B B B B B B B B B B\n"
    "#define D C C C C C C C C C C\n#define E D D D D D D D D D D\n"
    'extern "C" __global__ void k(float* x) { float a = x[threadIdx.x]; E E '
    "x[threadIdx.x] = a; }\n"
)


async def test_a_call_of_jobs_sent_faster_than_they_compile_is_read_no_further(
    server_dir: Path,
) -> None:
    """A client that reads its answers and sends many jobs at once: the server reads its
    jobs only while those it holds, not yet handed to the scheduler, are under the bound
    (it held every one it was sent). The jobs are one slow compile, so none is answered
    before all are sent; then every one is."""
    many, per_message = 4 * MAX_WAITING_JOBS, 100
    with running_server(server_dir) as (_, paths):
        client = ServerClient(paths.socket)
        async with anyio.create_task_group() as tg:
            await client.start(tg)
            (first,) = _rendered(client, CompileJob(_SLOW_AND_SMALL, name="k"))
            await client.aclose()
        requests = [CompileRequest(i, first.prepared) for i in range(many)]
        with raw_client(paths) as sock:
            sock.settimeout(300)  # the compile runs while the sends wait (a loaded machine)
            answered: list[Any] = []

            def read_answers() -> None:
                while not answered or not answered[-1].end:
                    answer = raw_receive(sock)
                    assert isinstance(answer, Results), answer
                    answered.append(answer)

            reader = threading.Thread(target=read_answers)
            reader.start()
            try:
                for at in range(0, many, per_message):
                    chunk = requests[at : at + per_message]
                    last = at + per_message >= many
                    for message, blobs in _client._packed(1, False, chunk, at > 0, last):
                        sock.sendall(b"".join(encode(*send_form(message, blobs))))
            finally:
                reader.join(300)
            status = await _status_until(paths, lambda _: True)  # the client connected
    assert answered[-1].end
    assert sum(len(a.outcomes) for a in answered) == many
    assert status["waiting"] == 0
    assert MAX_WAITING_JOBS <= status["waiting_peak"] <= MAX_WAITING_JOBS + per_message, status
