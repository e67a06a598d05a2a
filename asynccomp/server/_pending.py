"""A call of a :class:`~._client.ServerClient` on its way: the jobs sent and not
answered, and how each ends (an outcome from the server, or lost with it)."""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from ..backends import BackendOutput
from ..runner import Outcome, RunEvents
from ._wire import WireError

__all__ = ("Pending",)


class Pending:
    """A call sent (or being sent) and not answered in full."""

    def __init__(self, events: RunEvents, want: bool = True) -> None:
        self.events = events
        self.want = want  # whether outcomes come with their logs and binaries
        self.waiting: set[int] = set()
        self.all_sent = False
        self.done = anyio.Event()
        self.failed: tuple[str, str] | None = None  # (status, message) once lost or refused

    def expect(self, indices: Sequence[int]) -> None:
        if self.failed is not None:  # lost before these went out: they fail at once
            for index in indices:
                self.events.finished(index, _failed(*self.failed))
            return
        self.waiting.update(indices)

    def started(self, index: int) -> None:
        if index in self.waiting:
            self.events.started(index)

    def finish(self, index: int, outcome: Outcome) -> None:
        if index not in self.waiting:
            raise WireError(f"an outcome for job {index}, which is not waiting")
        self.waiting.discard(index)
        self.events.finished(index, outcome)
        self.check()

    def fail(self, status: str, message: str) -> None:
        """End every job still waiting with ``status`` (``lost``: the server went away;
        ``internal``: it refused the call)."""
        self.failed = (status, message)
        for index in sorted(self.waiting):
            self.events.finished(index, _failed(status, message))
        self.waiting.clear()
        self.done.set()

    def check(self) -> None:
        if self.all_sent and not self.waiting:
            self.done.set()


def _failed(status: str, message: str) -> Outcome:
    return Outcome(BackendOutput(status, None, "", message), "none", 0.0, "")  # type: ignore[arg-type]
