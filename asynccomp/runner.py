"""Where compiles run: the :class:`Runner` interface between an engine and its compilers.

An :class:`~asynccomp.Engine` does the same work whatever door a call comes in by: it
checks the jobs, plans them (architecture, estimate, order), renders each for its
compiler (:class:`~asynccomp.backends.PreparedCompile`), builds the results, writes the
dumps and keeps the statistics. What it hands on is a stream of
:class:`CompileRequest` s, and what it gets back for each is an :class:`Outcome`. A
runner is what answers them:

- the engine's own scheduler (:class:`asynccomp.engine.InProcessRunner`): the cache, coalescing of
  identical compiles, longest-first slots, and the backends: NVRTC worker processes,
  nvcc subprocesses, or actors on a Ray cluster (:mod:`asynccomp.ray`);
- :class:`asynccomp.server.ServerClient`: the same scheduler in this user's compile
  server, shared by every process of the machine (:mod:`asynccomp.server`);
- a runner of one's own, ``Engine(runner=...)`` (as httpx's ``transport=``): the
  engine starts it and closes it with itself. It may wrap
  :class:`asynccomp.engine.InProcessRunner`, the in-process scheduler as a runner.

So results, errors and counts are made in one place, and a runner only says what
happened to each compile: when it started, and how it ended (compiled, answered from the
cache, or shared with an identical compile already under way).

Example: a runner that answers every request with what the request asked for, the way
the scheduler's lifecycle tests use one, run on a chunk of one request:

>>> import anyio, anyio.lowlevel
>>> from asynccomp.backends import BackendOutput, PreparedCompile
>>> from asynccomp.runner import CompileRequest, Outcome, Runner
>>> class Echo(Runner):
...     where = "nowhere"
...     async def run(self, requests, events, *, want=True):
...         async for chunk in requests:
...             for request in chunk:
...                 events.started(request.index)
...                 await anyio.lowlevel.checkpoint()
...                 out = BackendOutput("ok", request.prepared.source.encode(), "")
...                 filename = request.prepared.filename
...                 events.finished(request.index, Outcome(out, "compiled", 0.0, filename))
>>> class Told:  # a RunEvents: what the engine's front would be told
...     def started(self, index):
...         print("started", index)
...     def finished(self, index, outcome):
...         print("finished", index, outcome.answer, outcome.output.binary)
>>> async def chunks():
...     prepared = PreparedCompile("nvrtc", "cubin", "sm_90a", "void k() {}", "k.cu", ())
...     yield [CompileRequest(0, prepared)]
>>> anyio.run(Echo().run, chunks(), Told())
started 0
finished 0 compiled b'void k() {}'
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import anyio.abc
import anyio.lowlevel

from .backends import BackendOutput, PreparedCompile

__all__ = ("Answer", "CompileRequest", "Outcome", "RunEvents", "Runner")

#: How a runner answered a request: it ran the compiler, the cache held the result, an
#: identical compile already under way answered it too, or nothing could run it (the
#: compile server went away, or refused it): its status says why.
Answer = Literal["compiled", "cache", "shared", "none"]


@dataclass(frozen=True, slots=True)
class CompileRequest:
    """One compile asked of a runner: job ``index`` of its call, rendered, with the
    engine's estimate of its compile time (the runner starts the longest first)."""

    index: int
    prepared: PreparedCompile
    estimate: float = 0.0


@dataclass(frozen=True, slots=True)
class Outcome:
    """How one request ended.

    Attributes:
        output: the compiler's output (status, binary, log, message). For a request
            run with ``want=False`` (a prefetch nobody reads), ``binary`` and ``log``
            may be left out: the status still tells how it went.
        answer: ``"compiled"``, ``"cache"``, ``"shared"`` or ``"none"``.
        elapsed: seconds the compiler ran (for ``"shared"``, the compile it shared;
            ``0.0`` from the cache).
        filename: the program file name the log's diagnostics use (another job's, for
            an answer from the cache or a shared compile: the engine renames them).
    """

    output: BackendOutput
    answer: Answer
    elapsed: float
    filename: str


class RunEvents(Protocol):
    """What a runner reports to the engine, from the engine's event loop, at once (no
    waiting): a request started compiling, a request ended. Each request ends exactly
    once; a request answered without a compile (cache, shared) never starts."""

    def started(self, index: int) -> None: ...

    def finished(self, index: int, outcome: Outcome) -> None: ...


class Runner(abc.ABC):
    """Runs an engine's compiles. Lives as long as the engine: :meth:`start` as it
    starts, :meth:`aclose` as it closes."""

    #: Where the compiles run, for people: "in process", "on the compile server (pid
    #: 123)", "on Ray at 10.0.0.5:6379".
    where: str = "in process"

    @abc.abstractmethod
    async def run(
        self,
        requests: AsyncIterable[Sequence[CompileRequest]],
        events: RunEvents,
        *,
        want: bool = True,
    ) -> None:
        """Run every request ``requests`` yields (in chunks, as the engine plans them)
        and report each one to ``events``; return when all have ended. Cancelled, stop
        what is still queued or compiling for this call (and nobody else's).
        ``want=False``: nobody reads the outputs (only the cache wants them)."""

    async def start(self, task_group: anyio.abc.TaskGroup) -> None:  # noqa: B027 - optional
        """Called once as the engine starts; ``task_group`` lives until it closes."""

    async def warm_up(self) -> None:  # noqa: B027 - optional
        """Pay first-compile costs now (start workers, load NVRTC and common headers)."""

    async def make_pch(self, prepared: PreparedCompile) -> bool:
        """Make the precompiled header ``prepared`` (a job with ``-pch``) would use, where
        its compiles run; whether they share it now. ``False``: this runner makes none
        ahead (the first job that needs one makes it)."""
        await anyio.lowlevel.checkpoint()
        return False

    def slots(self) -> Mapping[str, int]:
        """How many compiles of each backend run at once (the engine's plan uses it)."""
        return {}

    def workers(self) -> int:
        """Worker processes alive now (NVRTC workers, Ray actors)."""
        return 0

    async def aclose(self) -> None:  # noqa: B027 - optional
        """Stop everything the runner started."""
