"""The compile server's calls on the wire, message by message: a one-job call answered
from the cache is one message each way, a compile adds the news that it started, the
worker count is pushed when it changes (never polled), and a server of another
protocol is a clear error."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from asynccomp import CompileJob, Engine, ServerError
from asynccomp._scheduler.local import Tally, timed_out
from asynccomp._version import __version__
from asynccomp.server import (
    Server,
    ServerClient,
    _client,
    _connect,
    _protocol,
    _session,
    server_paths,
)
from asynccomp.server._protocol import PROTOCOL, Hello
from asynccomp.server._wire import encode

from .kernels import ARCH, scale_kernel
from .servers import raw_receive, server_folder
from .test_server_bounds import _retired


@pytest.fixture
def server_dir() -> Iterator[Path]:
    with server_folder() as folder:
        yield folder


class Recorded:
    """What a client sent and received, message by message (types, and ``end``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.said: list[tuple[str, str, Any]] = []
        send, parse = _connect.Connection.send, _protocol.parse

        async def sent(connection: _connect.Connection, message: Any, blobs: Any = ()) -> None:
            self.said.append(("out", type(message).__name__, getattr(message, "end", None)))
            await send(connection, message, blobs)

        def received(message: Any) -> Any:
            answer = parse(message)
            self.said.append(("in", type(answer).__name__, getattr(answer, "end", None)))
            return answer

        monkeypatch.setattr(_connect.Connection, "send", sent)
        monkeypatch.setattr(_client, "parse", received)

    def calls(self) -> list[tuple[str, str, Any]]:
        """What was said about calls (worker counts left out)."""
        return [s for s in self.said if s[1] != "Workers"]


async def test_a_one_job_cache_hit_is_one_message_each_way_and_a_compile_one_more(
    server_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the server moves into its empty folder; undone after
    monkeypatch.setenv("ASYNCCOMP_CACHE_DIR", str(tmp_path / "cache"))
    paths = server_paths(server_dir)
    server = Server(paths, idle_timeout=0)
    monkeypatch.setattr(server, "_retire", _retired(server))
    recorded = Recorded(monkeypatch)
    job = CompileJob(scale_kernel(4.25), name="one")
    async with anyio.create_task_group() as tg:
        await tg.start(server.serve)
        async with Engine(arch=ARCH, server=str(paths.socket)) as engine:
            compiled = await engine.compile(job)
            after_compile = recorded.calls()
            recorded.said.clear()
            hit = await engine.compile(job)
            stats = engine.statistics()
        server.stop()
    assert compiled.ok and not compiled.cached and hit.ok and hit.cached
    assert after_compile == [
        ("out", "Compile", True),
        ("in", "Results", False),  # it started
        ("in", "Results", True),  # its outcome, and the call's end
    ]
    assert recorded.calls() == [("out", "Compile", True), ("in", "Results", True)]
    assert (stats.compiled, stats.cache_hits, stats.completed) == (1, 1, 2)


async def test_the_worker_count_is_pushed_when_a_worker_starts(
    server_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No keepalive in the test's time (it would say the count too): what says that the
    first NVRTC worker started is the server telling its clients as it happens."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ASYNCCOMP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_session, "KEEPALIVE", 3600.0)
    paths = server_paths(server_dir)
    server = Server(paths, idle_timeout=0)
    monkeypatch.setattr(server, "_retire", _retired(server))
    recorded = Recorded(monkeypatch)
    async with anyio.create_task_group() as tg:
        await tg.start(server.serve)
        async with Engine(arch=ARCH, server=str(paths.socket)) as engine:
            assert engine.statistics().workers == 0
            assert (await engine.compile(CompileJob(scale_kernel(4.5)))).ok
            workers = engine.statistics().workers
        server.stop()
    told = [s[1] for s in recorded.said if s[0] == "in"]
    # Said before the outcome: the worker counts from its start, not its first answer.
    assert told.index("Workers") < len(told) - 1, told
    assert workers == 1


def test_tally_decides_timed_out_one_way() -> None:
    """A job timed out when its compile says so and it had a timeout of its own; a
    compile stopped for another job's shorter timeout is a plain failure of this one."""
    assert timed_out("timeout", 2.0) and not timed_out("timeout", None)
    assert not timed_out("failed", 2.0) and not timed_out(None, 2.0)
    tally = Tally()
    for status, timeout in [("ok", None), ("timeout", 1.0), ("timeout", None), (None, None)]:
        tally.ended(status, timeout)
    assert (tally.completed, tally.succeeded, tally.failed, tally.timed_out) == (4, 1, 3, 1)


async def test_a_server_of_another_protocol_is_a_server_error_naming_both(
    server_dir: Path, caplog: Any
) -> None:
    """A server that welcomes with another protocol (an older asynccomp on a named
    socket) is refused at once, before the rest of its welcome is read (whose shape
    may differ), with both protocols named."""
    caplog.set_level(logging.WARNING)
    path = server_dir / "old.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen()

        def welcome_one() -> None:
            peer, _ = listener.accept()
            with peer:
                peer.settimeout(60)
                assert isinstance(raw_receive(peer), Hello)
                fields = {"type": "welcome", "protocol": PROTOCOL - 1, "version": "0.0.old"}
                peer.sendall(b"".join(encode(fields)))  # the rest of its shape unknown
                peer.recv(1)

        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, welcome_one)
            with pytest.raises(ServerError) as raised:
                await ServerClient(path).start(tg)
    said = str(raised.value)
    assert f"speaks protocol {PROTOCOL - 1}" in said and f"protocol {PROTOCOL}" in said
    assert "0.0.old" in said and __version__ in said
