"""What an engine is: its settings and where its compiles run, read-only.

:class:`EngineView` is the part of :class:`~asynccomp.Engine` that answers questions
about it (its arch, its slots, its toolkit, where it compiles) from its
:class:`~asynccomp.config.EngineConfig` and, once started, its parts; the engine's
calls are :mod:`._engine`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .._scheduler.local import NvrtcMode
from ..backends import BackendSettings, compiler_versions
from ..config import EngineConfig, OnRay, OnServer, RunMode
from ..errors import EngineClosed
from ..runner import Runner
from ..toolkit import Toolkit
from ._lifecycle import Lifecycle

if TYPE_CHECKING:
    from ..cache import TieredCache
    from ..ray import RayExecutor

__all__ = ("EngineView", "NvrtcMode")


class EngineView:
    """An engine's settings and whereabouts (a base of :class:`~asynccomp.Engine`)."""

    config: EngineConfig
    _backend_settings: dict[str, BackendSettings]  # each backend's, in process
    _runner: Runner | None  # what runs the compiles (None: a compile server's client)
    _life: Lifecycle

    @property
    def mode(self) -> RunMode:
        """Where the compiles run: :class:`~asynccomp.config.InProcess`,
        :class:`~asynccomp.config.OnServer` or :class:`~asynccomp.config.OnRay` (with a
        runner of one's own, ``InProcess`` holding the toolkit the jobs are rendered
        with)."""
        return self.config.mode

    @property
    def arch(self) -> str | None:
        return self.config.job.arch

    @property
    def tvm_fast_path(self) -> bool:
        return self.config.job.tvm_fast_path

    @property
    def dump_dir(self) -> Path | None:
        return None if self.config.job.dump_dir is None else Path(self.config.job.dump_dir)

    @property
    def split_compile(self) -> int:
        return self.config.job.split_compile

    @property
    def server(self) -> str | None:
        """``"auto"``, the socket of the server, or ``None`` (not on a server)."""
        mode = self.config.mode
        return str(mode.address) if isinstance(mode, OnServer) else None

    @property
    def executor(self) -> RayExecutor | None:
        mode = self.config.mode
        return mode.executor if isinstance(mode, OnRay) else None

    @property
    def nvrtc_mode(self) -> NvrtcMode:
        """How local NVRTC compiles run (on a compile server: the server's business)."""
        settings = self._backend_settings.get("nvrtc")
        return "threads" if settings is None else settings.mode

    @property
    def slots(self) -> Mapping[str, int]:
        """How many compiles of each backend run at once where this engine's jobs go:
        its local workers, its Ray actors, or (once started) its compile server's."""
        if self._life.parts is not None:
            return self._life.parts.runner.slots()
        return {} if self._runner is None else dict(self._runner.slots())

    @property
    def nvrtc_workers(self) -> int:
        return self.slots.get("nvrtc", 0)

    @property
    def nvcc_workers(self) -> int:
        return self.slots.get("nvcc", 0)

    @property
    def on_cluster(self) -> bool:
        """Whether the jobs compile on the executor's cluster (known once started;
        ``False`` with local workers, also after a fallback)."""
        return self._life.parts is not None and self._life.parts.on_cluster

    @property
    def where(self) -> str:
        """Where the compiles run: ``"in process"``, ``"on the compile server (pid
        N)"`` or ``"on Ray at ADDRESS"`` (known once started)."""
        if self._life.parts is not None:
            return self._life.parts.runner.where
        return "on the compile server" if self._runner is None else self._runner.where

    @property
    def cache(self) -> TieredCache | None:
        """The engine's result cache (``None`` when caching is off, and on a compile
        server, whose cache is the server's)."""
        return None if self._life.parts is None else self._life.parts.cache

    @property
    def toolkit(self) -> Toolkit:
        """The toolkit this engine compiles with (on a compile server: the server's, as
        it says in its welcome). Known once the engine has started."""
        if self._life.parts is not None:
            return self._life.parts.toolkit
        mode = self.config.mode
        if not isinstance(mode, OnServer) and mode.toolkit is not None:
            return mode.toolkit
        raise EngineClosed("the toolkit is looked up when the engine starts")

    @property
    def compiler_versions(self) -> dict[str, str | None]:
        """The versions of the compilers of every backend (NVRTC, nvcc, ptxas), for
        reports."""
        return compiler_versions(self.toolkit)
