"""An engine's settings in one place: :class:`EngineConfig`.

Every setting of :class:`~asynccomp.Engine` (and :class:`~asynccomp.SyncEngine`, and
``asynccomp serve``) is a field here, with its one default and its one check. Settings
fall in two groups, and that is what decides who may set them:

- **job settings** decide how each job is planned and rendered, and apply in every
  mode: ``arch``, ``tvm_fast_path``, ``dump_dir``, ``split_compile``, ``cost_model``.
- **runner settings** decide where and how the compiles run: worker counts, the NVRTC
  mode, the toolkit, the cache, the remote cache, the executor. On a compile server
  they are the server's (``asynccomp serve`` takes them); with a Ray executor the
  worker settings are the cluster's (its actors are the slots) unless the executor
  falls back to local workers.

A setting given to a mode that does not use it is refused with
:class:`~asynccomp.InvalidJob` naming it (never silently ignored), by one set of rules
for every mode (:meth:`EngineConfig.check`): an engine in process, on a compile server,
on a Ray cluster, and the compile server itself, which takes no job settings (they are
each client's).

>>> EngineConfig(server="auto", nvrtc_workers=2).check("engine")
Traceback (most recent call last):
    ...
asynccomp.errors.InvalidJob: invalid server 'auto': nvrtc_workers belong to the server: ...
>>> EngineConfig(arch="sm_90a").check("server")
Traceback (most recent call last):
    ...
asynccomp.errors.InvalidJob: invalid arch 'sm_90a': arch belong to each client: ...

>>> config = EngineConfig(arch="sm_90a", nvrtc_workers=4)
>>> sorted(config.changed())
['arch', 'nvrtc_workers']
>>> EngineConfig(split_compile=-1)
Traceback (most recent call last):
    ...
asynccomp.errors.InvalidJob: invalid split_compile -1: must be an int >= 0
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .errors import InvalidJob
from .job import parse_arch

if TYPE_CHECKING:
    from .cache import RemoteCache
    from .cost import CostModel
    from .ray import RayExecutor
    from .toolkit import Toolkit

__all__ = (
    "CLIENT_SETTINGS",
    "EngineConfig",
    "JOB_SETTINGS",
    "NvrtcModeSetting",
    "RUNNER_SETTINGS",
    "Role",
    "WORKER_SETTINGS",
    "parse_server",
)

NvrtcModeSetting = Literal["auto", "threads", "processes"]
#: What a config is for: an engine (in process, on a server or on Ray), or a compile
#: server (``asynccomp serve``).
Role = Literal["engine", "server"]

#: Settings that decide how jobs are planned and rendered: every mode takes them.
JOB_SETTINGS = ("arch", "tvm_fast_path", "dump_dir", "split_compile", "cost_model")
#: Settings of the local workers (a Ray cluster's actors stand in for them).
WORKER_SETTINGS = ("nvrtc_workers", "nvcc_workers", "nvrtc_mode")
#: Settings of whatever runs the compiles (a compile server has its own).
RUNNER_SETTINGS = (
    *WORKER_SETTINGS,
    "toolkit",
    "cache",
    "cache_dir",
    "memory_cache_bytes",
    "disk_cache_bytes",
    "cache_failures",
    "remote_cache",
    "executor",
)
#: Settings only a client has: a compile server takes none (each client's engine sets
#: its own job settings; a server is not on a server).
CLIENT_SETTINGS = (*JOB_SETTINGS, "server")


def _is_path(value: object) -> bool:
    # "" would be the working directory: never what a caller meant.
    return isinstance(value, (str, os.PathLike)) and bool(os.fspath(value))


def _count(name: str, value: object, least: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise InvalidJob(name, value, f"must be an int >= {least}")


@dataclass(frozen=True)
class EngineConfig:
    """The settings of one engine; see :class:`~asynccomp.Engine` for what each does.

    Made and checked with no I/O: a bad value raises :class:`~asynccomp.InvalidJob`
    naming it. Once made, ``server`` is ``"auto"``, an absolute socket path (a ``str``)
    or ``None``; ``dump_dir`` an absolute :class:`~pathlib.Path` or ``None``;
    ``cache_dir`` a ``Path``, ``False`` or ``None``.
    """

    arch: str | None = None
    nvrtc_workers: int | None = None
    nvcc_workers: int | None = None
    nvrtc_mode: NvrtcModeSetting = "auto"
    tvm_fast_path: bool = True
    toolkit: Toolkit | None = None
    dump_dir: str | os.PathLike[str] | None = None
    cache: bool = True
    cache_dir: str | os.PathLike[str] | Literal[False] | None = None
    memory_cache_bytes: int = 256 * 2**20
    disk_cache_bytes: int | None = None  # None: $ASYNCCOMP_CACHE_MAX_SIZE, the folder's, 4 GiB
    cache_failures: bool = False
    cost_model: CostModel | None = field(default=None, compare=False)
    split_compile: int = 0
    server: str | os.PathLike[str] | None = None
    remote_cache: str | RemoteCache | Literal[False] | None = None
    executor: RayExecutor | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # normalised values of a frozen dataclass
        if self.arch is not None:
            parse_arch(self.arch)
        for name in ("nvrtc_workers", "nvcc_workers"):
            if getattr(self, name) is not None:
                _count(name, getattr(self, name), 1)
        if self.nvrtc_mode not in ("auto", "threads", "processes"):
            raise InvalidJob("nvrtc_mode", self.nvrtc_mode, "expected auto, threads or processes")
        for name in ("tvm_fast_path", "cache", "cache_failures"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidJob(name, getattr(self, name), "must be True or False")
        if self.dump_dir is not None:
            if not _is_path(self.dump_dir):
                raise InvalidJob(
                    "dump_dir", self.dump_dir, "must be a non-empty folder path or None"
                )
            set_(self, "dump_dir", Path(self.dump_dir).absolute())
        if self.cache_dir is not None and self.cache_dir is not False:
            if not _is_path(self.cache_dir):
                raise InvalidJob(
                    "cache_dir", self.cache_dir, "must be a non-empty folder path, None or False"
                )
            set_(self, "cache_dir", Path(self.cache_dir))
        for name in ("memory_cache_bytes", "disk_cache_bytes"):
            value = getattr(self, name)
            if value is None and name == "disk_cache_bytes":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InvalidJob(name, value, "must be a number of bytes, 0 or more")
        _count("split_compile", self.split_compile, 0)
        if self.cost_model is not None:
            from .cost import CostModel

            if not isinstance(self.cost_model, CostModel):
                raise InvalidJob("cost_model", self.cost_model, "must be a CostModel or None")
        if self.toolkit is not None:
            from .toolkit import Toolkit

            if not isinstance(self.toolkit, Toolkit):
                raise InvalidJob("toolkit", self.toolkit, "must be a Toolkit or None")
        set_(self, "server", parse_server(self.server))
        if self.executor is not None:
            from .ray import RayExecutor

            if not isinstance(self.executor, RayExecutor):
                raise InvalidJob(
                    "executor", self.executor, "must be an asynccomp.ray.RayExecutor or None"
                )
        remote = self.remote_cache
        if remote is not None and remote is not False and not isinstance(remote, str):
            from .cache import RemoteCache

            if not isinstance(remote, RemoteCache):
                raise InvalidJob(
                    "remote_cache", remote, "must be a URL, a RemoteCache, None or False"
                )

    def changed(self) -> set[str]:
        """The settings that differ from their defaults (what a caller asked for)."""
        return {
            f.name
            for f in fields(self)
            if getattr(self, f.name)
            != (f.default if f.default is not dataclasses.MISSING else None)
        }

    def replace(self, **changes: Any) -> EngineConfig:
        """A copy with ``changes`` (checked again)."""
        return dataclasses.replace(self, **changes)

    def check(self, role: Role) -> None:
        """Raise :class:`~asynccomp.InvalidJob` for a setting this role does not use
        (the one set of rules of every mode; no I/O):

        - an engine on a compile server (``server``) takes no runner settings: they
          are the server's (but ``remote_cache=False``: a server it starts is started
          without one);
        - an engine or a server whose executor may not fall back to local workers
          (``RayExecutor(fallback=False)``) takes no worker settings: the cluster's
          actors are its slots;
        - a compile server takes no client settings (:data:`CLIENT_SETTINGS`).
        """
        if role == "server":
            self.refuse(
                CLIENT_SETTINGS,
                "each client",
                "set them on each client's Engine (asynccomp serve takes the runner's: "
                "-j, --cache-dir, --ray)",
            )
        elif self.server is not None:
            # remote_cache=False asks nothing of the server but to start without one.
            exempt = ("remote_cache",) if self.remote_cache is False else ()
            self.refuse(
                [s for s in RUNNER_SETTINGS if s not in exempt],
                "server",
                "set them on `asynccomp serve`, or leave server=None to compile in this process",
            )
        if self.executor is not None and not self.executor.fallback:
            self.refuse(
                WORKER_SETTINGS,
                "executor",
                "a Ray cluster's actors are the engine's slots (RayExecutor(actors=N) "
                "sets their number; fallback=True takes local workers when it cannot be "
                "used, with these settings)",
            )

    def refuse(self, names: Iterable[str], owner: str, how: str) -> None:
        """Raise :class:`~asynccomp.InvalidJob` if any of ``names`` was changed: they
        belong to ``owner`` in this mode (``how`` says where to set them). The error
        names ``owner`` when it is a setting, else the first setting given."""
        order = [f.name for f in fields(self)]
        given = sorted(self.changed() & set(names), key=order.index)
        if given:
            field_ = owner if owner in order else given[0]
            raise InvalidJob(
                field_,
                getattr(self, field_),
                f"{', '.join(given)} belong to {'the ' if owner in order else ''}{owner}: {how}",
            )


#: ``server`` words (any case), the same for ``Engine(server=...)`` and
#: ``$ASYNCCOMP_SERVER``: this user's compile server, or compiles in this process.
SERVER_ON = ("auto", "on", "1", "true", "yes")
SERVER_OFF = ("off", "0", "false", "no")


def parse_server(value: object) -> str | None:
    """What a ``server`` setting means, for ``Engine(server=...)`` and
    ``$ASYNCCOMP_SERVER`` alike: ``"auto"`` (this user's compile server, started if
    needed) for ``"auto"``/``on``/``1``/``true``/``yes``; ``None`` (compile in this
    process) for ``None``/``off``/``0``/``false``/``no``; else the absolute path of a
    server's socket.

    >>> parse_server("off") is None, parse_server("Auto")
    (True, 'auto')
    """
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lower() in SERVER_OFF:
        return None
    if isinstance(value, str) and value.strip().lower() in SERVER_ON:
        return "auto"
    if isinstance(value, (str, os.PathLike)) and os.fspath(value):
        text = os.fspath(value)
        if isinstance(text, str) and "\x00" not in text:
            return str(Path(text).absolute())
    raise InvalidJob(
        "server", value, 'expected "auto", "off", the path of a server\'s socket, or None'
    )
