"""``asynccomp serve``: run the compile server, or ask the running one for its status or
to stop."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from ..errors import AsyncCompError, ServerError
from ..server import DEFAULT_IDLE_TIMEOUT, Server, server_paths, status, stop
from ._args import non_negative_float, positive_int
from ._compile import ray_executor

DESCRIPTION = """\
Run the compile server: one engine (NVRTC workers, nvcc slots, the cache) that every
process of this user shares through a Unix socket. Engine(server="auto"), the TVM
facade and `asynccomp compile` use it (starting it when needed); it stops after
--idle-timeout seconds without a client.

  asynccomp serve                 # in the foreground (for a terminal or a service manager)
  asynccomp serve --status        # JSON: clients, queued, running, compiled, hits, workers, uptime
  asynccomp serve --stop
"""


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "serve",
        help="run the compile server every process shares",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    action = p.add_mutually_exclusive_group()
    action.add_argument("--status", action="store_true", help="print the running server's status")
    action.add_argument("--stop", action="store_true", help="stop the running server")
    p.add_argument(
        "--idle-timeout",
        type=non_negative_float,
        default=DEFAULT_IDLE_TIMEOUT,
        metavar="SECONDS",
        help=f"stop after this long without a client (0: never; default {DEFAULT_IDLE_TIMEOUT:g})",
    )
    p.add_argument(
        "-j", "--jobs", type=positive_int, default=None, metavar="N", help="NVRTC workers"
    )
    p.add_argument("--cache-dir", type=Path, default=None, metavar="DIR", help="disk cache folder")
    p.add_argument(
        "--warm",
        action="store_true",
        help="start and warm up every NVRTC worker as the server starts (by default they "
        "start as jobs need them, and a warm-up never delays a waiting job)",
    )
    p.add_argument(
        "--ray",
        default=None,
        metavar="ADDRESS",
        help="compile on actors of a Ray cluster (auto, HOST:PORT, ray://HOST:PORT) instead "
        "of local workers; -j is then unused",
    )
    p.add_argument(
        "--ray-fallback",
        action="store_true",
        help="with --ray: use local workers if the cluster cannot be used",
    )
    p.add_argument(
        "--server-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="the private folder of the socket, lock and log (default: $ASYNCCOMP_SERVER_DIR, "
        "$XDG_RUNTIME_DIR/asynccomp or /tmp/asynccomp-UID)",
    )
    p.add_argument(
        "--detach",
        action="store_true",
        help="run in the background; return once it listens (how clients start it)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        paths = server_paths(args.server_dir)
        if args.status:
            print(json.dumps(status(paths.socket), indent=2))
            return 0
        if args.stop:
            if stop(paths.socket):
                print(f"asynccomp: the compile server at {paths.socket} was told to stop")
                return 0
            print(f"asynccomp: no compile server is running at {paths.socket}", file=sys.stderr)
            return 1
    except ServerError as exc:
        print(f"asynccomp: error: {exc}", file=sys.stderr)
        return 1
    engine: dict[str, Any] = {}
    if args.jobs is not None:
        engine["nvrtc_workers"] = args.jobs
        engine["nvcc_workers"] = args.jobs
    if args.cache_dir is not None:
        engine["cache_dir"] = args.cache_dir
    try:
        engine["executor"] = ray_executor(args)
    except ValueError as exc:
        print(f"asynccomp: error: {exc}", file=sys.stderr)
        return 2
    server = Server(paths, idle_timeout=args.idle_timeout, engine=engine, warm=args.warm)
    if args.detach:
        return _detach(server)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    try:
        anyio.run(server.serve)
    except AsyncCompError as exc:
        print(f"asynccomp: error: {exc}", file=sys.stderr)
        return 1
    return 0


def _detach(server: Server) -> int:
    """Fork a server that outlives this process; return once it listens (0) or failed
    (1, with its error on stderr)."""
    read, write = os.pipe()
    if os.fork():
        os.close(write)
        with os.fdopen(read, "rb") as pipe:
            said = pipe.read().decode(errors="replace")
        if said.startswith("ok"):
            return 0
        print(
            f"asynccomp: error: {said.strip() or 'the server died while starting'}", file=sys.stderr
        )
        return 1
    # The server: a session of its own (no terminal, no signals of the caller's group).
    os.close(read)
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    log = os.open(server.paths.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")

    async def serve() -> None:
        async with anyio.create_task_group() as tg:
            await tg.start(server.serve)
            os.write(write, b"ok\n")
            os.close(write)

    code = 0
    try:
        anyio.run(serve)
    except BaseException as exc:
        code = 1
        try:
            os.write(write, f"{exc}\n".encode())
        except OSError:
            pass
        logging.getLogger("asynccomp.server").exception("the server failed")
    os._exit(code)
