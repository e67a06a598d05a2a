"""``asynccomp compile``: compile .cu files and folders of them, many at once."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import anyio

from ..backends._base import safe_stem
from ..engine import Engine
from ..errors import AsyncCompError, ClusterError, DumpDirError, InvalidJob, ServerError
from ..gpu import local_gpu_arch
from ..job import CompileJob
from ..ray import RayExecutor
from ..result import CompileResult
from ..server import server_paths
from ._args import arch, positive_float, positive_int
from ._inputs import compiler_options, find_inputs, read_source, source_options, unique_names
from ._progress import Display, Estimates, JobLines, ProgressBar
from ._report import failures, records, summary

__all__ = (
    "add_ray_timeout",
    "compiler_options",
    "ray_executor",
    "running_server",
    "unique_names",
)

DESCRIPTION = """\
Compile .cu files, and every .cu file under the given folders, concurrently.

Extra compiler options go after -X (-X=--use_fast_math, -X=-DTILE=64) or after a lone
--, which passes everything behind it to the compiler as is:
  asynccomp compile kernels/ --arch sm_90a -- -DTILE=64 -Iinclude --use_fast_math
Relative -I folders are made absolute (nvcc runs in a folder of its own).

When this user's compile server runs (`asynccomp serve`), the jobs go there: its
workers are warm and its cache is shared with every other process. --server starts
it if needed; --no-server, -j, --cache-dir and --no-cache compile in this process.
--ray ADDRESS compiles on a Ray cluster's actors (asynccomp.ray), this process keeping
the cache, dumps and results.

On a terminal a progress bar shows done/failed/cached counts, the jobs compiling now
and an ETA from the estimated compile times; otherwise each finished job prints one line
(with its warning count; -v prints the warnings, -q only failures). A summary follows.
Ctrl-C stops the run: what finished is summarized (and written with --json, the rest
marked interrupted). --json - writes the records to stdout (the summary then goes to
stderr). Exit status: 0 when every job compiled, 1 when one failed (its diagnostics go to
stderr), 2 for a usage error, 130 when interrupted."""


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "compile",
        help="compile .cu files and folders concurrently",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("paths", nargs="*", type=Path, help=".cu files, or folders searched for them")
    p.add_argument("--examples", action="store_true", help="also compile the built-in examples")
    p.add_argument("--backend", choices=("nvrtc", "nvcc"), default="nvrtc", help="default: nvrtc")
    p.add_argument(
        "--output",
        choices=("cubin", "fatbin", "ptx"),
        default=None,
        help="default: cubin for nvrtc, fatbin for nvcc",
    )
    p.add_argument("--arch", type=arch, default=None, help="e.g. sm_90a (default: the local GPU's)")
    p.add_argument(
        "-j",
        "--jobs",
        type=positive_int,
        default=None,
        metavar="N",
        help="compiles at once (default: one per CPU)",
    )
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help="how long one job may compile",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="write one binary per input here, named after it (inputs that share a file "
        "name get their folder in the name)",
    )
    p.add_argument(
        "--dump", type=Path, default=None, metavar="DIR", help="dump every job under this folder"
    )
    p.add_argument(
        "--json",
        default=None,
        metavar="FILE",
        help="write one record per job here (- for stdout): status, error, compiler log, "
        "warning count, times, binary, resources",
    )
    talk = p.add_mutually_exclusive_group()
    talk.add_argument(
        "-q", "--quiet", action="store_true", help="print failures and the summary only"
    )
    talk.add_argument("-v", "--verbose", action="store_true", help="print each job's warnings")
    p.add_argument("--cache-dir", type=Path, default=None, metavar="DIR", help="disk cache folder")
    p.add_argument("--no-cache", action="store_true", help="compile everything afresh")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--server",
        action="store_true",
        help="compile on this user's compile server, starting it if none runs",
    )
    where.add_argument(
        "--no-server",
        action="store_true",
        help="compile in this process even when a compile server runs",
    )
    p.add_argument(
        "--ray",
        default=None,
        metavar="ADDRESS",
        help="compile on actors of a Ray cluster: auto (the one this machine belongs to), "
        "HOST:PORT or ray://HOST:PORT (needs pip install 'asynccomp[ray]')",
    )
    p.add_argument(
        "--ray-fallback",
        action="store_true",
        help="with --ray: compile in this process if the cluster cannot be used",
    )
    add_ray_timeout(p)
    p.add_argument(
        "-X",
        "--option",
        action="append",
        default=[],
        dest="options",
        metavar="FLAG",
        help="extra compiler option (repeatable), e.g. -X=-DTILE=64 -X=--use_fast_math",
    )
    p.set_defaults(run=run, extra_options=[])


def _check_arch(arch: str | None) -> None:
    if arch is None and local_gpu_arch() is None:
        raise ValueError("no GPU found to ask for an architecture: give --arch, e.g. sm_90a")


def _check_outputs(args: argparse.Namespace) -> None:
    """An output that cannot be written fails now, before any compile (exit 2)."""
    if args.out is not None:
        try:
            args.out.mkdir(parents=True, exist_ok=True)
            probe = args.out / f".asynccomp-probe-{os.getpid()}"
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise OSError(f"--out {args.out} cannot be written: {exc.strerror or exc}") from None
    if args.json is not None and args.json != "-":
        path = Path(args.json)
        existed = path.exists()
        try:
            with open(path, "a"):
                pass
        except OSError as exc:
            raise OSError(f"--json {path} cannot be written: {exc.strerror or exc}") from None
        if not existed:
            path.unlink()


def _jobs(args: argparse.Namespace, files: list[Path], names: list[str]) -> list[CompileJob]:
    options = compiler_options([*args.options, *args.extra_options])
    jobs = []
    for path, name in zip(files, names, strict=True):
        try:
            source = read_source(path)
            jobs.append(
                CompileJob(
                    source,
                    name=name,
                    backend=args.backend,
                    output=args.output,
                    arch=args.arch,
                    options=[*source_options(path, source), *options],
                    timeout=args.timeout,
                )
            )
        except (OSError, AsyncCompError) as exc:
            raise ValueError(f"{path}: {exc}") from exc
    return jobs


def run(args: argparse.Namespace) -> int:
    try:
        files = find_inputs(args.paths, args.examples)
        names = unique_names(files)
        _check_arch(args.arch)
        jobs = _jobs(args, files, names)
        _check_outputs(args)
        engine = _engine(args)
    except (OSError, ValueError) as exc:  # InvalidJob is a ValueError
        return _usage_error(exc)
    renamed = [(f, n) for f, n in zip(files, names, strict=True) if n != safe_stem(f.stem)]
    if renamed and not args.quiet:
        shown = ", ".join(f"{f} -> {n}" for f, n in renamed)
        print(
            f"asynccomp: note: inputs share file names, so some are renamed: {shown}",
            file=sys.stderr,
        )
    # With --json -, stdout carries the records: everything else goes to stderr.
    out = sys.stderr if args.json == "-" else sys.stdout
    state = _Run(engine, jobs, dict(zip(jobs, files, strict=True)), args, out)
    with _quiet_ctrl_c(out):
        try:
            return anyio.run(state.compile)
        except (DumpDirError, ServerError, ClusterError, InvalidJob) as exc:  # as it starts
            if state.display is not None:
                state.display.close()
            return _usage_error(exc)


class _Run:
    """One ``asynccomp compile`` run: its jobs, what finished, and how it ended."""

    def __init__(
        self,
        engine: Engine,
        jobs: list[CompileJob],
        paths: dict[CompileJob, Path],
        args: argparse.Namespace,
        out: TextIO,
    ) -> None:
        self.engine, self.jobs, self.paths, self.args, self.out = engine, jobs, paths, args, out
        self.results: list[CompileResult] = []
        self.finished_at: dict[int, float] = {}
        self.interrupted = False
        self.display: Display | None = None
        self.where = engine.where

    def _output_name(self, result: CompileResult) -> str | None:
        """The file ``--out`` gets for this result (named after its job), if any."""
        if self.args.out is None or result.binary is None:
            return None
        return f"{result.job.name}.{result.output}"

    async def compile(self) -> int:
        args, engine, jobs = self.args, self.engine, self.jobs
        verbosity = -1 if args.quiet else (1 if args.verbose else 0)
        started = time.monotonic()
        async with engine:
            workers = engine.nvrtc_workers if args.backend == "nvrtc" else engine.nvcc_workers
            estimates = Estimates({job: engine.estimate(job) for job in jobs}, workers)
            kind: type[Display] = ProgressBar if self.out.isatty() and not args.quiet else JobLines
            self.display = display = kind(
                len(jobs),
                self.out,
                verbosity=verbosity,
                names=[job.name for job in jobs],
                estimates=estimates,
                running=engine.running,
            )
            async with anyio.create_task_group() as tg:
                with anyio.CancelScope() as work:
                    tg.start_soon(self._watch_for_ctrl_c, work)
                    if isinstance(display, ProgressBar):
                        tg.start_soon(_tick, display)
                    async with engine.as_completed(jobs) as completed:
                        async for result in completed:
                            self._finished(result)
                tg.cancel_scope.cancel()
            versions = engine.compiler_versions
            self.where = engine.where
        wall = time.monotonic() - started
        display.close("asynccomp: interrupted" if self.interrupted else "")
        return self._report(wall, versions)

    async def _watch_for_ctrl_c(self, work: anyio.CancelScope) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                self.interrupted = True
                work.cancel()
                return

    def _finished(self, result: CompileResult) -> None:
        self.results.append(result)
        self.finished_at[id(result)] = time.time()
        assert self.display is not None
        self.display.job_done(result)
        name = self._output_name(result)
        if name is not None:
            assert self.args.out is not None and result.binary is not None
            try:
                (self.args.out / name).write_bytes(result.binary)
            except OSError as exc:  # the disk filled up: the other binaries go on
                print(f"asynccomp: could not write {self.args.out / name}: {exc}", file=sys.stderr)

    def _report(self, wall: float, versions: dict[str, str | None]) -> int:
        results = self.results
        if self.args.json is not None:
            done = {id(r.job) for r in results}
            unfinished = [job for job in self.jobs if id(job) not in done]
            rows = records(
                results, self.finished_at, unfinished, self.paths, self._output_name, versions
            )
            text = json.dumps(rows, indent=2) + "\n"
            if self.args.json == "-":
                sys.stdout.write(text)
                sys.stdout.flush()
            else:
                Path(self.args.json).write_text(text)
        print(summary(results, wall, total=len(self.jobs), where=self.where), file=self.out)
        report = failures(results)
        if report:
            print(f"\n{report}", file=sys.stderr)
        if self.interrupted:
            return 130
        return 1 if any(not r.ok for r in results) else 0


@contextlib.contextmanager
def _quiet_ctrl_c(stream: TextIO) -> Iterator[None]:
    """On a terminal, don't let it echo ``^C`` over the progress bar."""
    try:
        fd = stream.fileno()
        saved = termios.tcgetattr(fd) if os.isatty(fd) else None
    except (OSError, ValueError, termios.error):
        saved = None
    if saved is None:
        yield
        return
    quiet = list(saved)
    quiet[3] = quiet[3] & ~termios.ECHOCTL
    try:
        termios.tcsetattr(fd, termios.TCSANOW, quiet)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSANOW, saved)


def _engine(args: argparse.Namespace) -> Engine:
    """On the running compile server (warm, shared with other processes) when there is
    one and the run asks nothing of its own of the engine; else in this process."""
    executor = ray_executor(args)
    own = (
        args.jobs is not None or args.cache_dir is not None or args.no_cache or executor is not None
    )
    if args.server and own:
        raise ValueError(
            "--server compiles with the server's settings: drop -j, --cache-dir, --no-cache, "
            "--ray (or start the server with asynccomp serve --ray)"
        )
    server = "auto" if args.server else None
    if server is None and not own and not args.no_server:
        server = running_server()
    if server is not None:
        return Engine(arch=args.arch, dump_dir=args.dump, server=server)
    return Engine(
        arch=args.arch,
        nvrtc_workers=args.jobs,
        nvcc_workers=args.jobs,
        dump_dir=args.dump,
        cache=not args.no_cache,
        cache_dir=args.cache_dir,
        executor=executor,
    )


def add_ray_timeout(p: argparse.ArgumentParser) -> None:
    """``--ray-timeout``, for the commands that take ``--ray``."""
    p.add_argument(
        "--ray-timeout",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help="with --ray: give up joining the cluster, and again starting its actors, "
        f"after this long (default {RayExecutor.startup_timeout:g})",
    )


def ray_executor(args: argparse.Namespace) -> RayExecutor | None:
    """The executor ``--ray ADDRESS`` (``--ray-fallback``, ``--ray-timeout``) ask for."""
    for flag, value in (("--ray-fallback", args.ray_fallback), ("--ray-timeout", args.ray_timeout)):
        if value not in (None, False) and args.ray is None:
            raise ValueError(f"{flag} goes with --ray ADDRESS")
    if args.ray is None:
        return None
    timeout = RayExecutor.startup_timeout if args.ray_timeout is None else args.ray_timeout
    return RayExecutor(address=args.ray, fallback=args.ray_fallback, startup_timeout=timeout)


def running_server() -> str | None:
    """The socket of this user's compile server for this toolkit, if one is listening."""
    try:
        path = server_paths().socket
    except ServerError:
        return None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return None
    return str(path)


def _usage_error(exc: BaseException) -> int:
    print(f"asynccomp: error: {exc}", file=sys.stderr)
    return 2


async def _tick(display: Display) -> None:
    while True:
        await anyio.sleep(0.25)
        display.tick()
