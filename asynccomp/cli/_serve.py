"""``asynccomp serve``: run the compile server, or ask the running one for its status or
to stop."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from .._os import child_environ
from ..config import server_mode
from ..errors import AsyncCompError, ServerError
from ..server import DEFAULT_IDLE_TIMEOUT, Server, ServerPaths, server_paths, status, stop
from ..workers import stop_shared
from ._args import JOBS_HELP, JobsAction, add_umask, non_negative_float
from ._messages import StripPrefix, in_cli_terms
from ._ray_args import add_ray_timeout, ray_address, ray_executor

DESCRIPTION = """\
Run the compile server: one engine (NVRTC workers, nvcc slots, the cache) that every
process of this user shares through a Unix socket. Engine(server="auto"), the TVM
facade and `asynccomp compile` use it (starting it when needed); it stops after
--idle-timeout seconds without a client.

  asynccomp serve                 # in the foreground (for a terminal or a service manager)
  asynccomp serve --status        # JSON: clients, queued, running, compiled, hits, workers, uptime
  asynccomp serve --stop          # and the tuners' warm templates shared in its folder
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
    p.add_argument("-j", "--jobs", action=JobsAction, default=None, metavar="N", help=JOBS_HELP)
    p.add_argument("--cache-dir", type=Path, default=None, metavar="DIR", help="disk cache folder")
    p.add_argument(
        "--warm",
        action="store_true",
        help="start and warm up every NVRTC worker as the server starts (by default they "
        "start as jobs need them, and a warm-up never delays a waiting job)",
    )
    p.add_argument(
        "--ray",
        type=ray_address,
        default=None,
        metavar="ADDRESS",
        help="compile on actors of a Ray cluster (auto, HOST:PORT, ray://HOST:PORT) instead "
        "of local workers (its actors are the slots: -j only with --ray-fallback)",
    )
    p.add_argument(
        "--ray-fallback",
        action="store_true",
        help="with --ray: use local workers if the cluster cannot be used",
    )
    add_ray_timeout(p)
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
    p.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    add_umask(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    try:
        paths = server_paths(args.server_dir)
        if args.status:
            print(json.dumps(status(paths.socket), indent=2))
            return 0
        if args.stop:
            # The tuners' warm templates share the server's folder: they end with it.
            templates = stop_shared(paths.folder)
            if templates:
                told = "1 warm template" if templates == 1 else f"{templates} warm templates"
                print(f"asynccomp: {told} of the tuners told to stop")
            if stop(paths.socket):
                print(f"asynccomp: the compile server at {paths.socket} was told to stop")
                return 0
            print(f"asynccomp: no compile server is running at {paths.socket}", file=sys.stderr)
            return 0 if templates else 1
    except ServerError as exc:
        print(f"asynccomp: error: {exc}", file=sys.stderr)
        return 1
    try:
        # Checked before --detach: the refusal is this command's.
        mode = server_mode(
            workers=args.jobs,
            cache_dir=args.cache_dir,
            executor=ray_executor(args),
        )
    except ValueError as exc:
        print(f"asynccomp: error: {in_cli_terms(exc)}", file=sys.stderr)
        return 2
    if args.detach:
        return _detach(paths, args)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:  # the format names the logger already
        handler.addFilter(StripPrefix())
    try:
        server = Server(paths, mode=mode, idle_timeout=args.idle_timeout, warm=args.warm)
    except ValueError as exc:  # SettingsError: e.g. a bad $ASYNCCOMP_REMOTE_CACHE
        _tell(args.ready_fd, str(exc))
        print(f"asynccomp: error: {exc}", file=sys.stderr)
        return 2
    try:
        if args.ready_fd is None:
            anyio.run(server.serve)
        else:
            anyio.run(_serve_and_say, server, args.ready_fd)
    except AsyncCompError as exc:
        _tell(args.ready_fd, f"{exc}")
        print(f"asynccomp: error: {exc}", file=sys.stderr)
        return 1
    except BaseException as exc:
        _tell(args.ready_fd, f"the server failed: {exc!r}")
        raise
    return 0


async def _serve_and_say(server: Server, fd: int) -> None:
    """Serve; write ``ok`` to ``fd`` once listening (what ``--detach`` waits for)."""
    async with anyio.create_task_group() as tg:
        await tg.start(server.serve)
        _tell(fd, "ok")


def _tell(fd: int | None, text: str) -> None:
    if fd is None:
        return
    with contextlib.suppress(OSError):
        os.write(fd, f"{text}\n".encode())
        os.close(fd)


def _detach(paths: ServerPaths, args: argparse.Namespace) -> int:
    """Start the server as a fresh interpreter in a session of its own (no terminal, no
    signals of the caller's group; never a fork of this process, whose threads and
    state it must not inherit), its output to the server's log; return once it listens
    (0) or failed (1, with its error on stderr)."""
    read, write = os.pipe()
    os.set_inheritable(write, True)
    argv = [a for a in args.command_line[1:] if a != "--detach"]
    command = [sys.executable, "-m", "asynccomp", *argv, "--ready-fd", str(write)]
    env = child_environ()
    log = os.open(paths.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        os.posix_spawn(
            sys.executable,
            command,
            env,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, devnull, 0),
                (os.POSIX_SPAWN_DUP2, log, 1),
                (os.POSIX_SPAWN_DUP2, log, 2),
                (os.POSIX_SPAWN_CLOSE, read),
            ],
            setsid=True,
        )
    finally:
        for fd in (write, log, devnull):
            os.close(fd)
    with os.fdopen(read, "rb") as pipe:
        said = pipe.read().decode(errors="replace").strip()
    if said == "ok":
        return 0
    print(f"asynccomp: error: {said or 'the server died while starting'}", file=sys.stderr)
    return 1
