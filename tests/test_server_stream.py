"""The wire's reader and the message streams both ends of a connection use
(``asynccomp.server._wire.MessageReader``, ``asynccomp.server._stream``): messages come
out whole however their bytes arrive, sizes are refused from their prefixes, what a
socket will not take waits in the stream until the peer reads, and a server's answer
written at once (a call's last, when its writer is idle) goes out whole or costs a
client that reads nothing its connection at the deadline."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import struct
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import pytest

from asynccomp import CompileJob, Engine
from asynccomp._version import __version__
from asynccomp.server import Server, ServerClient, server_paths
from asynccomp.server import _client as client_module
from asynccomp.server._paths import peer_uid
from asynccomp.server._protocol import PROTOCOL, Hello, send_form
from asynccomp.server._stream import MessageStream, _AnyioMessages, open_stream
from asynccomp.server._wire import FRAME_LIMIT, MESSAGE_LIMIT, Message, MessageReader, WireError
from asynccomp.server._wire import encode as encode_frames

from .kernels import ARCH
from .processes import wait_until
from .servers import server_folder
from .test_server_bounds import _retired
from .test_server_client import _rendered

LENGTH = struct.Struct(">I")


def _message(type_: str, blobs: list[bytes], **fields: Any) -> bytes:
    return b"".join(encode_frames({"type": type_, **fields}, blobs))


def _same(message: Message, type_: str, blobs: list[bytes]) -> bool:
    return message.type == type_ and message.blobs == blobs


# -- the reader ------------------------------------------------------------------------------

BIG = [os.urandom(FRAME_LIMIT + 12345), b"", os.urandom(FRAME_LIMIT // 2)]  # three frames


@pytest.mark.parametrize("piece", [1, 3, 4096, 65536, 10**9])
def test_the_reader_gives_the_same_messages_however_the_bytes_arrive(piece: int) -> None:
    small = [("hello", []), ("jobs", [b"src", b"more"]), ("end", [b""])]
    wire = b"".join(_message(t, b, n=i) for i, (t, b) in enumerate(small))
    if piece >= 4096:  # the 6 MiB one too (byte by byte, only the small ones)
        small.append(("big", BIG))
        wire += _message("big", BIG)
    reader = MessageReader()
    got: list[Message] = []
    for at in range(0, len(wire), piece):
        got.extend(reader.feed(wire[at : at + piece]))
        assert len(reader._buffer) <= FRAME_LIMIT + LENGTH.size  # never past a frame
    assert reader.idle
    assert [(m.type, m.blobs) for m in got] == small
    assert [m.fields["n"] for m in got[:3]] == [0, 1, 2]


def _frame(body: bytes) -> bytes:
    return LENGTH.pack(len(body)) + body


def _header(fields: dict[str, Any]) -> bytes:
    raw = json.dumps(fields).encode()
    return LENGTH.pack(len(raw)) + raw


@pytest.mark.parametrize(
    ("wire", "says"),
    [
        (LENGTH.pack(0), "a frame of 0 bytes"),
        (LENGTH.pack(FRAME_LIMIT + 1), f"a frame of {FRAME_LIMIT + 1} bytes"),
        (_frame(LENGTH.pack(MESSAGE_LIMIT)), "a header of"),
        (_frame(_header({"type": "x", "blobs": [MESSAGE_LIMIT]})), "over the limit"),
        (_frame(_header({"type": "x", "blobs": [2]}) + b"abc"), "runs past its message"),
        (_frame(_header({"type": "x", "blobs": [2]}) + b"a") + _frame(b"bc"), "runs past"),
        (_frame(_header({"blobs": []})), "no type"),
        (_frame(LENGTH.pack(3) + b"{]x"), "not JSON"),
    ],
    ids=[
        "empty frame",
        "huge frame",
        "huge header",
        "huge message",
        "past",
        "past-2",
        "type",
        "json",
    ],
)
def test_the_reader_refuses_what_is_not_the_protocol_from_the_first_bytes_that_say_so(
    wire: bytes, says: str
) -> None:
    """A size is refused from its prefix, before the bytes it announces arrive."""
    reader = MessageReader()
    with pytest.raises(WireError, match=says):
        reader.feed(wire)


# -- the streams, on a real Unix socket ------------------------------------------------------


@contextlib.asynccontextmanager
async def _pair(kind: str) -> AsyncIterator[tuple[MessageStream, MessageStream]]:
    """Two ends of one connection, as streams of ``kind``: ``protocol`` (asyncio's
    transport, what both ends use on asyncio) or ``anyio`` (anyio's stream, what a
    client uses on anyio's other backends)."""
    with server_folder() as folder:  # short: tmp_path may be too deep for a socket
        listener = await anyio.create_unix_listener(folder / "s")
        try:
            client = await anyio.connect_unix(folder / "s")
            server = await listener.accept()
        finally:
            await listener.aclose()
    if kind == "protocol":
        ends = (await open_stream(client), await open_stream(server))
    else:
        ends = (_anyio_messages(client), _anyio_messages(server))
    try:
        yield ends
    finally:
        for end in ends:
            await end.aclose()


def _anyio_messages(stream: anyio.abc.SocketStream) -> MessageStream:
    return _AnyioMessages(stream, peer_uid(stream.extra(anyio.abc.SocketAttribute.raw_socket)))


KINDS = ["protocol", "anyio"]


@pytest.mark.parametrize("kind", KINDS)
async def test_what_the_socket_does_not_take_waits_until_the_peer_reads(kind: str) -> None:
    async with _pair(kind) as (a, b):
        assert a.peer_uid == b.peer_uid == os.getuid()
        for frame in encode_frames({"type": "big"}, BIG):
            a.write(frame)
        a.write(_message("after", [b"x"]))
        assert a.buffered > 0  # 6 MiB: more than any socket holds
        got: list[Message] = []

        async def read_two() -> None:
            for _ in range(2):
                message = await b.receive()
                assert message is not None
                got.append(message)

        async with anyio.create_task_group() as tg:
            tg.start_soon(read_two)
            with anyio.fail_after(60):
                await a.drain()
        assert a.buffered == 0
        assert _same(got[0], "big", BIG) and _same(got[1], "after", [b"x"])


@pytest.mark.parametrize("kind", KINDS)
async def test_many_messages_sent_before_any_is_read_all_arrive_in_order(kind: str) -> None:
    """Reading stops while messages wait to be taken, and goes on as they are."""
    async with _pair(kind) as (a, b):
        written = anyio.Event()

        async def send_all() -> None:
            for i in range(1000):
                a.write(_message("n", [b"%d" % i]))
            written.set()
            await a.drain()  # as a writer does: what the socket did not take goes out

        async with anyio.create_task_group() as tg:
            tg.start_soon(send_all)
            await written.wait()  # all written before any is read
            with anyio.fail_after(60):
                for i in range(1000):
                    message = await b.receive()
                    assert message is not None and message.blobs == [b"%d" % i]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_close_between_messages_is_the_end_and_inside_one_a_wire_error(kind: str) -> None:
    async with _pair(kind) as (a, b):
        whole = _message("whole", [b"1"])
        a.write(whole)
        a.write(whole[: len(whole) // 2])
        await a.drain()
        await a.aclose()
        message = await b.receive()
        assert message is not None and _same(message, "whole", [b"1"])
        with pytest.raises(WireError, match="closed inside a message"):
            await b.receive()
    async with _pair(kind) as (a, b):
        a.write(whole)
        await a.drain()
        a.shut()
        assert (await b.receive()) is not None
        assert await b.receive() is None
        with pytest.raises(anyio.BrokenResourceError):
            for _ in range(1000):  # the peer is gone: a write says so (soon, if not at once)
                a.write(whole)
                await anyio.lowlevel.checkpoint()


# -- a server's answer written at once -------------------------------------------------------

#: A source whose compile log is 4 MB (NVRTC echoes each #warning): its answer is far
#: more than a socket holds, so what is written at once waits for the client to read.
LOUD = (
    "\n".join(f'#warning "w{i} ' + "x" * 1000 + '"' for i in range(2000))
    + '\nextern "C" __global__ void loud(float* x) { x[0] = 1.0f; }\n'
)


@pytest.fixture
def in_process_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Server]:
    monkeypatch.chdir(tmp_path)  # the server moves into its empty folder; undone after
    with server_folder() as folder:
        server = Server(server_paths(folder), idle_timeout=0, write_timeout=1.0)
        # The lock file names this process: gone after, or the folder's cleanup kills it.
        monkeypatch.setattr(server, "_retire", _retired(server))
        yield server


async def test_a_large_cache_hit_goes_out_whole_and_unread_costs_the_client_its_connection(
    in_process_server: Server, caplog: Any
) -> None:
    server = in_process_server
    caplog.set_level(logging.WARNING, "asynccomp.server")
    job = CompileJob(LOUD, name="loud")
    async with anyio.create_task_group() as tg:
        await tg.start(server.serve)
        async with Engine(arch=ARCH, server=str(server.paths.socket)) as engine:
            compiled = await engine.compile(job)
            assert compiled.ok and len(compiled.log) > 2**21, compiled.error
            hit = await engine.compile(job)  # one message back, written as the call ends
            assert hit.cached and hit.log == compiled.log and hit.binary == compiled.binary
        # A client that asks for it and reads nothing: dropped at the deadline, and what
        # waited for it is freed.
        client = ServerClient(server.paths.socket)
        async with anyio.create_task_group() as inner:
            await client.start(inner)
            (request,) = _rendered(client, job)
            await client.aclose()
        greedy = await anyio.connect_unix(server.paths.socket)
        for frame in encode_frames(*send_form(Hello(PROTOCOL, __version__, os.getpid()))):
            await greedy.send(frame)
        for message, blobs in client_module._packed(1, True, [request], False, True):
            for frame in encode_frames(*send_form(message, blobs)):
                await greedy.send(frame)
        await wait_until(lambda: any("read nothing" in r.getMessage() for r in caplog.records))
        await wait_until(lambda: server.status()["clients"] == 0)
        assert server.status()["unsent"] == 0
        await greedy.aclose()
        server.stop()
    dropped = [r.getMessage() for r in caplog.records if "read nothing" in r.getMessage()]
    assert len(dropped) == 1 and "dropped" in dropped[0], dropped
