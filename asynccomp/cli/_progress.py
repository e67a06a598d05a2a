"""What ``asynccomp compile`` shows while it runs.

On a terminal, :class:`ProgressBar` keeps one line redrawn in place (``\\r``): done,
failed and cached counts, the rate and an ETA; failures are printed above it as they
come. Elsewhere (a pipe, a file, CI logs), :class:`JobLines` prints one line per
finished job, which greps and diffs well.
"""

from __future__ import annotations

import shutil
import time
from typing import TextIO

from ..result import CompileResult

__all__ = ("Display", "JobLines", "ProgressBar", "job_status")


def job_status(result: CompileResult) -> str:
    """``ok``, ``cached``, or the error's type name (``CompileError``, ``CompileTimeout``...)."""
    if result.cached:
        return "cached"
    return "ok" if result.ok else type(result.error).__name__


def _clock(seconds: float) -> str:
    minutes, secs = divmod(int(seconds + 0.5), 60)
    return (
        f"{minutes // 60}:{minutes % 60:02d}:{secs:02d}"
        if minutes >= 60
        else f"{minutes}:{secs:02d}"
    )


class Display:
    """Counts finished jobs; subclasses decide what the user sees."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total = total
        self.stream = stream
        self.done = self.failed = self.cached = 0
        self.started = time.monotonic()

    def job_done(self, result: CompileResult) -> None:
        self.done += 1
        self.failed += not result.ok
        self.cached += result.cached

    def tick(self) -> None:
        """Called a few times a second while jobs run (a terminal redraws its clock)."""

    def close(self) -> None:
        """The last job is done: leave the output ready for the summary."""


class JobLines(Display):
    """One line per finished job: ``[done/total] name status seconds size registers``."""

    def job_done(self, result: CompileResult) -> None:
        super().job_done(result)
        size = f"{len(result.binary)} B" if result.binary is not None else "-"
        regs = ", ".join(f"{k}: {v.registers} regs" for k, v in list(result.resources.items())[:2])
        print(
            f"[{self.done}/{self.total}] {result.job.name:<28} {job_status(result):<14} "
            f"{result.elapsed:7.3f} s {size:>10}  {regs}".rstrip(),
            file=self.stream,
            flush=True,
        )


class ProgressBar(Display):
    """A progress bar on one terminal line, redrawn with ``\\r``."""

    def __init__(self, total: int, stream: TextIO) -> None:
        super().__init__(total, stream)
        self._drawn = False
        self.tick()

    def _width(self) -> int:
        return max(20, shutil.get_terminal_size((80, 24)).columns - 1)

    def line(self, now: float | None = None) -> str:
        elapsed = (time.monotonic() if now is None else now) - self.started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = _clock((self.total - self.done) / rate) if rate > 0 else "-:--"
        counts = (
            f" {self.done}/{self.total} done, {self.failed} failed, {self.cached} cached, "
            f"{rate:.1f}/s, ETA {eta}, {_clock(elapsed)} "
        )
        width = self._width()
        bar = max(10, min(40, width - len(counts) - 2))
        filled = bar * self.done // self.total if self.total else bar
        return f"[{'#' * filled}{'.' * (bar - filled)}]{counts}"[:width]

    def _write(self, text: str) -> None:
        # Pad to the width so a shorter line wipes the longer one it replaces.
        self.stream.write("\r" + text.ljust(self._width()))
        self.stream.flush()
        self._drawn = True

    def tick(self) -> None:
        self._write(self.line())

    def job_done(self, result: CompileResult) -> None:
        super().job_done(result)
        if not result.ok:
            self._write(f"FAILED {result.job.name} ({job_status(result)}, {result.elapsed:.2f} s)")
            self.stream.write("\n")
        self.tick()

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
