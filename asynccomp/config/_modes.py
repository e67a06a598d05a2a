"""Where an engine's compiles run, one type per mode, each with the settings that mode
uses and no other: :class:`InProcess` (this process's workers), :class:`OnServer`
(this user's compile server), :class:`OnRay` (a Ray cluster's actors).

A setting a mode does not use is not a field of its type, so it cannot be given there;
the one rule a type checks beyond its fields' values is :class:`OnRay`'s: worker
settings only for an executor that may fall back to local workers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeAlias

from ..errors import SettingsError
from ._checks import check_instance, check_path
from ._groups import CacheSettings, WorkerSettings, changed

if TYPE_CHECKING:
    from ..ray import RayExecutor
    from ..toolkit import Toolkit

__all__ = (
    "InProcess",
    "OnRay",
    "OnServer",
    "RunMode",
    "SERVER_OFF",
    "SERVER_ON",
    "parse_server",
    "switched_on",
)

#: ``server`` words (any case), the same for ``Engine(server=...)`` and
#: ``$ASYNCCOMP_SERVER``: this user's compile server, or compiles in this process.
SERVER_ON = ("auto", "on", "1", "true", "yes")
SERVER_OFF = ("off", "0", "false", "no")


def switched_on(variable: str) -> bool:
    """Whether the environment variable ``variable``, a switch that is on unless set,
    leaves it on: any value but the :data:`SERVER_OFF` words (any case)."""
    return os.environ.get(variable, "").strip().lower() not in SERVER_OFF


def parse_server(value: object, name: str = "server") -> str | None:
    """What a ``server`` setting means, for ``Engine(server=...)`` and
    ``$ASYNCCOMP_SERVER`` alike: ``"auto"`` (this user's compile server, started if
    needed) for ``"auto"``/``on``/``1``/``true``/``yes``; ``None`` (compile in this
    process) for ``None``/``off``/``0``/``false``/``no``; else the absolute path of a
    server's socket. A bad value is a :class:`~asynccomp.SettingsError` naming ``name``.

    >>> parse_server("off") is None, parse_server("Auto")
    (True, 'auto')
    """
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() in SERVER_OFF:
        return None
    if isinstance(value, str) and value.strip().lower() in SERVER_ON:
        return "auto"
    problem = 'expected "auto", "off", the path of a server\'s socket, or None'
    return str(check_path(name, value, problem).absolute())


def _check_toolkit(value: object) -> None:
    from ..toolkit import Toolkit

    check_instance("toolkit", value, Toolkit, "a Toolkit")


@dataclass(frozen=True)
class InProcess:
    """Compile in this process: its workers, its cache, its toolkit (the default mode).

    >>> InProcess(WorkerSettings(nvrtc_workers=4), CacheSettings(cache_dir=False)).changed()
    ['nvrtc_workers', 'cache_dir']
    """

    workers: WorkerSettings = field(default_factory=WorkerSettings)
    cache: CacheSettings = field(default_factory=CacheSettings)
    toolkit: Toolkit | None = None  # None: find_toolkit() as the engine starts

    def __post_init__(self) -> None:
        _check_toolkit(self.toolkit)

    def changed(self) -> list[str]:
        """The settings given (that differ from their defaults)."""
        return changed(self)


@dataclass(frozen=True)
class OnServer:
    """Compile on this user's compile server (:mod:`asynccomp.server`): ``address`` is
    ``"auto"`` (the server of this toolkit, started if none runs; also the other words
    of ``$ASYNCCOMP_SERVER``: ``on``, ``1``...) or the path of a running server's socket.
    Workers, cache and toolkit are the server's (``asynccomp serve`` sets them); the
    one such setting an engine takes is ``remote_cache=False``: a server it starts is
    started without ``$ASYNCCOMP_REMOTE_CACHE``.

    >>> OnServer().address, OnServer("on").address
    ('auto', 'auto')
    >>> OnServer("off")
    Traceback (most recent call last):
        ...
    asynccomp.errors.SettingsError: invalid address 'off': is not a compile server: ...
    """

    address: str | os.PathLike[str] = "auto"
    remote_cache: Literal[False] | None = None

    def __post_init__(self) -> None:
        address = parse_server(self.address, "address")
        if address is None:
            raise SettingsError(
                "address",
                self.address,
                "is not a compile server: InProcess() compiles in this process",
            )
        object.__setattr__(self, "address", address)
        if self.remote_cache is not None and self.remote_cache is not False:
            raise SettingsError(
                "remote_cache",
                self.remote_cache,
                "the remote tier is the server's: False (start the server without one) or None",
            )

    @property
    def socket(self) -> Path | None:
        """The server's socket, ``None`` for this user's own (``"auto"``)."""
        return None if self.address == "auto" else Path(self.address)

    def changed(self) -> list[str]:
        return changed(self)


@dataclass(frozen=True)
class OnRay:
    """Compile on a Ray cluster's actors (:class:`asynccomp.ray.RayExecutor`: address,
    actors, retries, fallback), with this process's scheduler, cache and toolkit.

    The actors are the engine's slots, so ``workers`` are refused unless the executor
    may fall back to local workers (``RayExecutor(fallback=True)``): then they are the
    workers it falls back to.
    """

    executor: RayExecutor
    workers: WorkerSettings = field(default_factory=WorkerSettings)
    cache: CacheSettings = field(default_factory=CacheSettings)
    toolkit: Toolkit | None = None

    def __post_init__(self) -> None:
        from ..ray import RayExecutor

        if not isinstance(self.executor, RayExecutor):
            raise SettingsError("executor", self.executor, "must be an asynccomp.ray.RayExecutor")
        _check_toolkit(self.toolkit)
        given = changed(self.workers)
        if given and not self.executor.fallback:
            raise SettingsError(
                "executor",
                self.executor,
                f"{', '.join(given)} belong to the executor: a Ray cluster's actors are the "
                "engine's slots (RayExecutor(actors=N) sets their number; fallback=True "
                "takes local workers when it cannot be used, with these settings)",
            )

    def changed(self) -> list[str]:
        return changed(self)


#: Where an engine's compiles run.
RunMode: TypeAlias = "InProcess | OnServer | OnRay"
