"""One warm engine per machine: the compile server every process of a user shares.

``asynccomp serve`` runs a :class:`Server`: one scheduler (NVRTC workers, nvcc slots,
the memory and disk cache, coalescing of identical compiles, longest-first dispatch)
behind a Unix socket in a private folder. ``Engine(server="auto")`` (and the TVM
facade, and ``asynccomp compile`` when one is running) run their compiles there
through a :class:`ServerClient` instead of starting workers of their own, starting the
server if none runs; it stops by itself after a few idle minutes. Everything else an
engine does (checking and planning jobs, results, errors, dumps, statistics) happens in
the client's engine, exactly as in process. One server runs per user, asynccomp version
and toolkit (:func:`server_identity`), and a client uses only a server of its own user
and toolkit, so it never gets binaries of another toolkit or another user's.

Example::

    import anyio
    from asynccomp import CompileJob, Engine
    from asynccomp import server

    async def main() -> None:
        async with Engine(arch="sm_90a", server="auto") as engine:  # starts one if needed
            result = await engine.compile(CompileJob('extern "C" __global__ void k() {}'))
            print(result.ok, result.cached)

    anyio.run(main)
    print(server.status()["workers"])  # the server's NVRTC workers, warm for the next run
    server.stop()
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

from ..errors import ServerError
from ._client import ServerClient
from ._connect import request, start_server
from ._paths import SERVER_DIR_ENV, ServerPaths, private_folder, server_identity, server_paths
from ._protocol import Status, StatusReply, Stop, Stopping
from ._server import DEFAULT_IDLE_TIMEOUT, Server

__all__ = (
    "DEFAULT_IDLE_TIMEOUT",
    "SERVER_DIR_ENV",
    "Server",
    "ServerClient",
    "ServerPaths",
    "private_folder",
    "server_identity",
    "server_paths",
    "start_server",
    "status",
    "stop",
)


def _socket(socket: str | Path | None) -> Path:
    return Path(socket) if socket is not None else server_paths().socket


def status(socket: str | Path | None = None) -> dict[str, Any]:
    """The running server's status (clients, queued, running, compiled, hits, workers,
    uptime, settings, cache statistics, ...); raises :class:`~asynccomp.ServerError`
    when none runs."""
    answer = anyio.run(request, _socket(socket), Status(1))
    if not isinstance(answer, StatusReply):
        raise ServerError(f"the compile server answered {type(answer).__name__} to status")
    return answer.status


def stop(socket: str | Path | None = None) -> bool:
    """Stop the running server; ``False`` if none was running."""
    try:
        answer = anyio.run(request, _socket(socket), Stop(1))
    except ServerError:
        return False
    return isinstance(answer, Stopping)
