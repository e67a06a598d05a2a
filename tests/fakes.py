"""A backend that compiles nothing, for the scheduler's lifecycle tests.

A job's source tells the fake what to do: ``"ok"`` returns at once with a binary,
``"fail"`` returns a compile error, and ``"block"`` waits at a gate until the test
opens it (:meth:`FakeBackend.release` for some jobs, :meth:`FakeBackend.release_all`
for every one). The fake says when each job starts (:meth:`FakeBackend.wait_started`),
so a test orders its steps on what happened, never on how long it slept (trio's
``Sequencer`` in spirit). The compile path itself (options, caching of real binaries,
faults of real compilers) is tested with the real NVRTC and nvcc elsewhere.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

import anyio
import anyio.lowlevel

from asynccomp import CompileJob, Engine
from asynccomp.backends import (
    BackendOptions,
    BackendOutput,
    BackendSettings,
    CompilerBackend,
    PreparedCompile,
)
from asynccomp.toolkit import Toolkit

__all__ = ("WAIT_LIMIT", "EchoBackend", "FakeBackend", "FakeEngine", "fake_job")

#: How long a test waits for an event the code under test should cause: far longer than
#: it takes on a loaded machine (milliseconds), so only a broken behaviour reaches it.
WAIT_LIMIT = 30.0


def fake_job(action: str, name: str = "fake", **kwargs: object) -> CompileJob:
    """A job whose source is ``action`` plus a unique comment (no two are the same
    compile unless ``name`` and ``action`` and the tag say so)."""
    tag = kwargs.pop("tag", name)
    return CompileJob(f"{action}\n// {tag}", name=name, **kwargs)  # type: ignore[arg-type]


class FakeBackend(CompilerBackend):
    """Counts what it is asked, does what each job's source says, and says when a job
    starts. Its events belong to the event loop of the engine that made it."""

    name = "nvrtc"

    def __init__(self, toolkit: Toolkit) -> None:
        super().__init__(toolkit)
        self.started: list[str] = []
        self.finished: list[str] = []
        self.cancelled: list[str] = []
        self.running = 0
        self.most_running = 0
        self.closed = False
        # Set (and replaced) at every start: waiters look at ``started`` again.
        self._a_start = anyio.Event()
        # One gate per job name, opened by release(); all of them by release_all().
        self._gates: dict[str, anyio.Event] = {}
        self._all_released = False

    def prepare(self, job: CompileJob, options: BackendOptions) -> PreparedCompile:
        return PreparedCompile(
            backend=job.backend,
            output=job.output_format,
            arch=options.arch,
            source=job.source,
            filename=f"{job.name}.cu",
            options=tuple(job.options),
            timeout=job.timeout,
        )

    async def wait_started(self, *names: str, count: int = 1, within: float = WAIT_LIMIT) -> None:
        """Until each job of ``names`` has started ``count`` times (with no names: until
        ``count`` starts of any job), failing after ``within`` seconds."""
        with anyio.fail_after(within):
            while not self._has_started(names, count):
                await self._a_start.wait()

    def _has_started(self, names: tuple[str, ...], count: int) -> bool:
        if not names:
            return len(self.started) >= count
        return all(self.started.count(name) >= count for name in names)

    def release(self, *names: str) -> None:
        """Let the ``block`` jobs called ``names`` finish (now, or when they start)."""
        for name in names:
            self._gate(name).set()

    def release_all(self) -> None:
        """Let every ``block`` job (now and later) finish."""
        self._all_released = True
        for gate in self._gates.values():
            gate.set()

    def _gate(self, name: str) -> anyio.Event:
        gate = self._gates.setdefault(name, anyio.Event())
        if self._all_released:
            gate.set()
        return gate

    async def run(self, prepared: PreparedCompile) -> BackendOutput:
        name = prepared.filename[: -len(".cu")]
        action = prepared.source.split("\n", 1)[0]
        self.started.append(name)
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        started, self._a_start = self._a_start, anyio.Event()
        started.set()
        try:
            if action == "block":
                await self._gate(name).wait()
            if action == "fail":
                return BackendOutput("failed", None, "fake: error: it failed", "fake failure")
            self.finished.append(name)
            return BackendOutput("ok", f"binary of {name}".encode(), "fake log")
        except anyio.get_cancelled_exc_class():
            self.cancelled.append(name)
            raise
        finally:
            self.running -= 1

    async def aclose(self) -> None:
        self.closed = True


class FakeEngine(Engine):
    """An engine whose NVRTC and nvcc backends are one :class:`FakeBackend`, and whose
    ``closing`` event is set as leaving ``async with`` begins (code that must run while
    the engine is closing waits on it)."""

    fake: FakeBackend
    closing: anyio.Event

    def _make_backends(self, toolkit: Toolkit) -> dict[str, CompilerBackend]:
        self.fake = FakeBackend(toolkit)
        self.closing = anyio.Event()
        return {"nvrtc": self.fake, "nvcc": self.fake}

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Set before the close begins; a waiter runs at the close's first wait, when the
        # engine is CLOSING already (its state changes before it waits for anything).
        self.closing.set()
        await super().__aexit__(exc_type, exc, tb)


class EchoBackend(CompilerBackend):
    """A registered backend of the tests' own: its binary is its source. A backend's
    whole description, as a module of asynccomp.backends would give it."""

    name = "echo"

    @classmethod
    def create(cls, toolkit: Toolkit, settings: BackendSettings) -> CompilerBackend:
        return cls(toolkit)

    @classmethod
    def version(cls, toolkit: Toolkit) -> str | None:
        return "1.0"

    @classmethod
    def archs(cls, toolkit: Toolkit) -> tuple[int, ...]:
        return ()

    @classmethod
    def identity(cls, toolkit: Toolkit) -> tuple[str, tuple[Path, ...]]:
        return "echo 1.0", ()

    def prepare(self, job: CompileJob, options: BackendOptions) -> PreparedCompile:
        return PreparedCompile(
            backend=self.name,
            output=job.output_format,
            arch=options.arch,
            source=job.source,
            filename=f"{job.name}.echo",
            options=tuple(job.options),
        )

    async def run(self, prepared: PreparedCompile) -> BackendOutput:
        await anyio.lowlevel.checkpoint()
        return BackendOutput("ok", prepared.source.encode(), "echo log")
