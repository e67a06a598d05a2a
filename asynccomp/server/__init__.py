"""One warm engine per machine: the compile server every process of a user shares.

``asynccomp serve`` runs a :class:`Server`: one :class:`~asynccomp.Engine` (NVRTC
workers, nvcc slots, the memory and disk cache, coalescing of identical jobs) behind a
Unix socket in a private folder. ``Engine(server="auto")`` (and the TVM facade, and
``asynccomp compile`` when one is running) send their jobs there instead of starting
workers of their own, starting the server if none runs; it stops by itself after a few
idle minutes. One server runs per user, asynccomp version and toolkit
(:func:`server_identity`), so a client never gets binaries of another toolkit.

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
from ._client import ServerClient, request, start_server
from ._paths import SERVER_DIR_ENV, ServerPaths, private_folder, server_identity, server_paths
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
    uptime, ...); raises :class:`~asynccomp.ServerError` when none runs."""
    answer = anyio.run(request, _socket(socket), {"type": "status"})
    if answer.type != "status":
        raise ServerError(f"the compile server answered {answer.type!r} to status")
    fields = dict(answer.fields)
    fields.pop("blobs", None)
    fields.pop("type", None)
    return fields


def stop(socket: str | Path | None = None) -> bool:
    """Stop the running server; ``False`` if none was running."""
    try:
        anyio.run(request, _socket(socket), {"type": "stop"})
    except ServerError:
        return False
    return True
