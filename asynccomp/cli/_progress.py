"""What ``asynccomp compile`` shows while it runs.

On a terminal, :class:`ProgressBar` keeps one line redrawn in place (``\\r``), every
frame as wide as the terminal with each field at a fixed place: done, failed and cached
counts, the jobs compiling now, and an ETA from the cost model's
estimates (scaled by how the finished compiles compared with theirs: with the longest
jobs started first, a rate-based ETA is far off early). Failures are printed above it
as they come. Elsewhere (a pipe, a file, CI logs), :class:`JobLines` prints one line
per finished job, which greps and diffs well. ``quiet`` prints failures only,
``verbose`` each job's warnings too.
"""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable, Sequence
from typing import TextIO

from ..job import CompileJob
from ..result import CompileResult

__all__ = ("Display", "Estimates", "JobLines", "ProgressBar", "job_status")

_WARNING = re.compile(r"(?m)^(?:.*\(\d+\): warning\b|ptxas warning\b|nvcc warning\b|.*: warning:)")


def job_status(result: CompileResult) -> str:
    """``ok``, ``cached``, or the error's type name (``CompileError``, ``CompileTimeout``...)."""
    if result.cached and result.ok:
        return "cached"
    return "ok" if result.ok else type(result.error).__name__


class Estimates:
    """The time left, from the jobs' estimated compile times: what is not finished,
    over the workers, or the longest job still running if that is longer; scaled by
    how long the finished compiles took against their estimates."""

    def __init__(self, estimates: dict[CompileJob, float], workers: int) -> None:
        self.estimates = estimates
        self.workers = max(1, workers)
        self.left = dict(estimates)
        self._took = 0.0
        self._expected = 0.0

    def done(self, result: CompileResult) -> None:
        expected = self.left.pop(result.job, 0.0)
        if not result.cached and result.elapsed > 0 and expected > 0:
            self._took += result.elapsed
            self._expected += expected

    def remaining(self, running: Sequence[tuple[CompileJob, float]]) -> float | None:
        if not self.left:
            return 0.0
        scale = self._took / self._expected if self._expected > 0 else 1.0
        total = scale * sum(self.left.values())
        longest = 0.0
        for job, elapsed in running:
            expected = scale * self.left.get(job, 0.0)
            total -= min(elapsed, expected)
            longest = max(longest, expected - elapsed)
        return max(total / self.workers, longest, 0.0)


class Display:
    """Counts finished jobs; subclasses decide what the user sees."""

    def __init__(
        self,
        total: int,
        stream: TextIO,
        *,
        verbosity: int = 0,
        names: Sequence[str] = (),
        estimates: Estimates | None = None,
        running: Callable[[], Sequence[tuple[CompileJob, float]]] = lambda: (),
    ) -> None:
        self.total = total
        self.stream = stream
        self.verbosity = verbosity
        self.estimates = estimates
        self.running = running
        self.done = self.failed = self.cached = 0
        self.started = time.monotonic()
        # Job names in one column, as wide as the longest (within reason).
        self.width = min(40, max((len(n) for n in names), default=10))

    def job_done(self, result: CompileResult) -> None:
        self.done += 1
        self.failed += not result.ok
        self.cached += result.cached and result.ok
        if self.estimates is not None:
            self.estimates.done(result)

    def tick(self) -> None:
        """Called a few times a second while jobs run (a terminal redraws its clock)."""

    def close(self, note: str = "") -> None:
        """The last job is done (or the run was stopped): leave the output ready for
        the summary."""

    def _warnings(self, result: CompileResult) -> list[str]:
        return [line for line in result.log.splitlines() if _WARNING.match(line)]


class JobLines(Display):
    """One line per finished job: ``[done/total] name status seconds size registers
    warnings``; ``verbose`` adds the warnings, ``quiet`` shows failures only."""

    def job_done(self, result: CompileResult) -> None:
        super().job_done(result)
        if self.verbosity < 0 and result.ok:
            return
        size = f"{len(result.binary)} B" if result.binary is not None else "-"
        regs = ", ".join(f"{k}: {v.registers} regs" for k, v in list(result.resources.items())[:2])
        warnings = self._warnings(result)
        noted = f"  {len(warnings)} warning{'s' * (len(warnings) != 1)}" if warnings else ""
        print(
            f"[{self.done}/{self.total}] {result.job.name:<{self.width}} "
            f"{job_status(result):<14} {result.elapsed:7.3f} s {size:>10}  {regs}{noted}".rstrip(),
            file=self.stream,
            flush=True,
        )
        if self.verbosity > 0:
            for line in warnings:
                print(f"    {line}", file=self.stream, flush=True)

    def close(self, note: str = "") -> None:
        if note:
            print(note, file=self.stream, flush=True)


# Columns the bar leaves for ", now: <names>" when the terminal is narrow.
_NOW_ROOM = 20


def _fixed_clock(seconds: float | None) -> str:
    """``h:mm:ss`` in 7 characters, so that the fields after it never move."""
    if seconds is None:
        return "-:--:--"
    minutes, secs = divmod(int(seconds + 0.5), 60)
    return f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}".rjust(7)


class ProgressBar(Display):
    """A progress bar on one terminal line, redrawn with ``\\r``. Every frame is as wide
    as the terminal, and its counts and clocks are padded to fixed widths, so that no
    field moves from one frame to the next; the names of the jobs running come last."""

    def __init__(self, total: int, stream: TextIO, **options: object) -> None:
        super().__init__(total, stream, **options)  # type: ignore[arg-type]
        self._drawn = False
        self._digits = len(str(total))
        self.tick()

    def _columns(self) -> int:
        return max(20, shutil.get_terminal_size((80, 24)).columns - 1)

    def line(self, now: float | None = None) -> str:
        elapsed = (time.monotonic() if now is None else now) - self.started
        running = list(self.running())
        left = self.estimates.remaining(running) if self.estimates is not None else None
        eta = _fixed_clock(left if self.done < self.total else None)
        digits = self._digits
        counts = (
            f" {self.done:>{digits}}/{self.total} done, {self.failed:>{digits}} failed, "
            f"{self.cached:>{digits}} cached, ETA {eta}, {_fixed_clock(elapsed)}"
        )
        if running:
            shown = ", ".join(job.name for job, _ in running[:3])
            more = f" +{len(running) - 3}" if len(running) > 3 else ""
            now_running = f", now: {shown}{more}"
        else:
            now_running = ""
        columns = self._columns()
        # The counts have the same length in every frame, and so has the bar, which
        # leaves room for the names of the jobs running.
        bar = max(10, min(30, columns - len(counts) - 2 - _NOW_ROOM))
        filled = bar * self.done // self.total if self.total else bar
        frame = f"[{'#' * filled}{'.' * (bar - filled)}]{counts}{now_running}"
        return frame[:columns].ljust(columns)

    def _write(self, text: str) -> None:
        # Pad to the width so a shorter line wipes the longer one it replaces.
        self.stream.write("\r" + text.ljust(self._columns()))
        self.stream.flush()
        self._drawn = True

    def tick(self) -> None:
        self._write(self.line())

    def job_done(self, result: CompileResult) -> None:
        super().job_done(result)
        if not result.ok:
            self._write(f"FAILED {result.job.name} ({job_status(result)}, {result.elapsed:.2f} s)")
            self.stream.write("\n")
        elif self.verbosity > 0:
            for line in self._warnings(result):
                self._write(f"{result.job.name}: {line}")
                self.stream.write("\n")
        self.tick()

    def close(self, note: str = "") -> None:
        if self._drawn:
            self.stream.write("\r" + " " * self._columns() + "\r" if note else "\n")
            if note:
                self.stream.write(note + "\n")
            self.stream.flush()
