"""One ``asynccomp compile`` run, once its jobs and engine are made: the jobs through
the engine, a display of what runs, Ctrl-C, the binaries written, and the report (the
summary, failures' diagnostics, ``--json``)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import termios
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import anyio

from .._perms import umask_of, write_new
from ..backends import backend_class
from ..engine import Engine
from ..errors import AsyncCompWarning
from ..job import CompileJob
from ..result import CompileResult
from ._args import jobs_text
from ._json_file import write_records
from ._progress import Display, Estimates, JobLines, ProgressBar
from ._report import failures, plural, records, summary

__all__ = ("SKIPPED", "CompileRun", "ignored_jobs", "quiet_ctrl_c")

#: The exit status of a run whose jobs all compiled but that skipped inputs it could not
#: use (each named on stderr): a sweep that lost a kernel must not pass for complete.
SKIPPED = 3


class CompileRun:
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
        self.skipped = 0  # inputs not compiled: exit status 3 when nothing else failed
        self.unwritten = False  # --json could not be written: exit status 1
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
            ignored = ignored_jobs(args, engine)
            if ignored is not None:
                warnings.warn(ignored, AsyncCompWarning, stacklevel=1)
            workers = engine.slots.get(args.backend, 0)
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
                write_new(self.args.out / name, result.binary, umask_of(None))
            except OSError as exc:  # the disk filled up: the other binaries go on
                print(f"asynccomp: could not write {self.args.out / name}: {exc}", file=sys.stderr)

    def _report(self, wall: float, versions: dict[str, str | None]) -> int:
        results = self.results
        if self.args.json is not None:
            done = {id(r.job) for r in results}
            unfinished = [job for job in self.jobs if id(job) not in done]
            rows = records(
                results,
                self.finished_at,
                unfinished,
                self.paths,
                self._output_name,
                versions,
                self.where,
            )
            if self.args.json == "-":
                sys.stdout.write(json.dumps(rows, indent=2) + "\n")
                sys.stdout.flush()
            else:
                seen = getattr(self.args, "json_state", None)
                try:
                    note = write_records(Path(self.args.json), rows, seen)
                except OSError as exc:
                    print(f"asynccomp: could not write {self.args.json}: {exc}", file=sys.stderr)
                    self.unwritten = True
                else:
                    if note is not None:
                        print(f"asynccomp: note: {note}", file=sys.stderr)
        print(
            summary(
                results,
                wall,
                total=len(self.jobs),
                where=self.where,
            ),
            file=self.out,
        )
        if self.skipped:
            print(
                f"{plural(self.skipped, 'input')} skipped (named above, not compiled)",
                file=self.out,
            )
        report = failures(results)
        if report:
            print(f"\n{report}", file=sys.stderr)
        if self.interrupted:
            return 130
        if self.unwritten or any(not r.ok for r in results):
            return 1
        return SKIPPED if self.skipped else 0


@contextlib.contextmanager
def quiet_ctrl_c(stream: TextIO) -> Iterator[None]:
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


async def _tick(display: Display) -> None:
    while True:
        await anyio.sleep(0.25)
        display.tick()


def ignored_jobs(args: argparse.Namespace, engine: Engine) -> str | None:
    """What to tell a run whose ``-j N`` a compile server overrides (once started), if
    the server runs another number of compiles at once for the run's backend."""
    asked = args.jobs if not isinstance(args.jobs, dict) else args.jobs.get(args.backend)
    if asked is None or engine.server is None:
        return None
    runs = engine.slots.get(args.backend, 0)
    if runs == asked:
        return None
    what = f"{backend_class(args.backend).worker_noun}s"  # "NVRTC workers", "nvcc runs"
    jobs = jobs_text(args.jobs)
    return (
        f"the compile server ({engine.where.removeprefix('on the compile server (')} runs "
        f"{runs} {what}; -j {jobs} ignored (use --no-server to compile in this process "
        f"with -j {jobs})"
    )
