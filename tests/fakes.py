"""A backend that compiles nothing, for the scheduler's lifecycle tests.

A job's source tells the fake what to do: ``"ok"`` returns at once with a binary,
``"fail"`` returns a compile error, ``"sleep:<seconds>"`` takes that long, and
``"block"`` waits until the test calls :meth:`FakeBackend.release_all`. The compile path
itself (options, caching of real binaries, faults of real compilers) is tested with the
real NVRTC and nvcc elsewhere.
"""

from __future__ import annotations

from pathlib import Path

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

__all__ = ("EchoBackend", "FakeBackend", "FakeEngine", "fake_job")


def fake_job(action: str, name: str = "fake", **kwargs: object) -> CompileJob:
    """A job whose source is ``action`` plus a unique comment (no two are the same
    compile unless ``name`` and ``action`` and the tag say so)."""
    tag = kwargs.pop("tag", name)
    return CompileJob(f"{action}\n// {tag}", name=name, **kwargs)  # type: ignore[arg-type]


class FakeBackend(CompilerBackend):
    """Counts what it is asked, and does what each job's source says."""

    name = "nvrtc"

    def __init__(self, toolkit: Toolkit) -> None:
        super().__init__(toolkit)
        self.started: list[str] = []
        self.finished: list[str] = []
        self.cancelled: list[str] = []
        self.running = 0
        self.most_running = 0
        self._release: anyio.Event | None = None
        self.closed = False

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

    def release_all(self) -> None:
        """Let every ``block`` job (now and later) finish."""
        if self._release is None:
            self._release = anyio.Event()
        self._release.set()

    async def run(self, prepared: PreparedCompile) -> BackendOutput:
        name = prepared.filename[: -len(".cu")]
        action = prepared.source.split("\n", 1)[0]
        self.started.append(name)
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            if action.startswith("sleep:"):
                await anyio.sleep(float(action.split(":", 1)[1]))
            elif action == "block":
                if self._release is None:
                    self._release = anyio.Event()
                await self._release.wait()
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
    """An engine whose NVRTC and nvcc backends are one :class:`FakeBackend`."""

    fake: FakeBackend

    def _make_backends(self, toolkit: Toolkit) -> dict[str, CompilerBackend]:
        self.fake = FakeBackend(toolkit)
        return {"nvrtc": self.fake, "nvcc": self.fake}


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
