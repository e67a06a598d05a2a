"""The settings that come in groups, each a frozen value object checked as it is made
(as httpx's ``Timeout`` and ``Limits``): what every job is planned with
(:class:`JobSettings`), the local workers (:class:`WorkerSettings`), the cache
(:class:`CacheSettings`). A field's name is the ``Engine(...)`` keyword that sets it,
so an error names the setting the same way whichever door it came in by.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from .._perms import parse_umask
from ..errors import InvalidJob, SettingsError
from ..job import parse_arch
from ._checks import check_bool, check_bytes, check_count, check_instance, check_path

if TYPE_CHECKING:
    from ..cache import RemoteCache
    from ..cost import CostModel

__all__ = ("CacheSettings", "JobSettings", "NvrtcModeSetting", "WorkerSettings", "changed")

NvrtcModeSetting = Literal["auto", "threads", "processes"]


def changed(settings: object) -> list[str]:
    """The fields of a settings object that differ from their defaults (what a caller
    asked for), in the order of its fields; a nested group (workers, cache) counts by
    its own fields. A field without a default (``OnRay.executor``) is always given."""
    names: list[str] = []
    for f in dataclasses.fields(settings):  # type: ignore[arg-type]
        value = getattr(settings, f.name)
        if isinstance(value, (WorkerSettings, CacheSettings)):
            names += changed(value)
        elif value != (f.default if f.default is not dataclasses.MISSING else None):
            names.append(f.name)
    return names


@dataclass(frozen=True)
class JobSettings:
    """How an engine plans and renders every job, in every mode (a compile server takes
    none: they are each client's). See :class:`~asynccomp.Engine` for each.

    >>> JobSettings(arch="sm_90a", split_compile=2, umask=0o007)  # doctest: +NORMALIZE_WHITESPACE
    JobSettings(arch='sm_90a', tvm_fast_path=True, dump_dir=None, split_compile=2,
                cost_model=None, umask=7)
    >>> JobSettings(split_compile=-1)
    Traceback (most recent call last):
        ...
    asynccomp.errors.SettingsError: invalid split_compile -1: must be an int >= 0
    """

    arch: str | None = None
    tvm_fast_path: bool = True
    #: Made absolute as the settings are made (the working folder may change).
    dump_dir: str | os.PathLike[str] | None = None
    split_compile: int = 0
    cost_model: CostModel | None = field(default=None, compare=False)
    #: The modes of the files and folders the engine writes (its dumps, and its cache
    #: in process): ``None`` takes ``$ASYNCCOMP_UMASK``, else 077 (private to the
    #: user). See :mod:`asynccomp._perms`.
    umask: int | None = None

    def __post_init__(self) -> None:
        if self.arch is not None:
            try:
                parse_arch(self.arch)
            except InvalidJob as exc:
                raise SettingsError("arch", self.arch, exc.problem) from None
        check_bool("tvm_fast_path", self.tvm_fast_path)
        if self.dump_dir is not None:
            path = check_path("dump_dir", self.dump_dir, "must be a non-empty folder path or None")
            object.__setattr__(self, "dump_dir", path.absolute())
        check_count("split_compile", self.split_compile, 0)
        from ..cost import CostModel

        check_instance("cost_model", self.cost_model, CostModel, "a CostModel")
        if self.umask is not None:
            object.__setattr__(self, "umask", parse_umask(self.umask))


@dataclass(frozen=True)
class WorkerSettings:
    """The local workers: how many compiles of each backend run at once, and how NVRTC
    runs (``None``: one per CPU, capped by memory). A Ray cluster's actors stand in for
    them; a compile server has its own.

    ``workers`` is every backend's count (an int), or some backends' by name (``{"nvrtc":
    8, "ptx": 2}``: any registered backend, one's own too); ``nvrtc_workers`` and
    ``nvcc_workers`` are those two backends' counts by their own names (they win over an
    int ``workers``; naming a backend twice is an error).

    >>> WorkerSettings(nvrtc_workers=0)
    Traceback (most recent call last):
        ...
    asynccomp.errors.SettingsError: invalid nvrtc_workers 0: must be an int >= 1
    >>> WorkerSettings(workers={"nvrtc": 8, "ptx": 2}).count("ptx")
    2
    >>> WorkerSettings(workers={"clang": 2})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    asynccomp.errors.SettingsError: invalid workers {'clang': 2}: 'clang' is not a backend ...
    """

    nvrtc_workers: int | None = None
    nvcc_workers: int | None = None
    nvrtc_mode: NvrtcModeSetting = "auto"
    workers: int | Mapping[str, int] | None = field(default=None, compare=True)

    def __post_init__(self) -> None:
        for name in ("nvrtc_workers", "nvcc_workers"):
            if getattr(self, name) is not None:
                check_count(name, getattr(self, name), 1)
        if self.nvrtc_mode not in ("auto", "threads", "processes"):
            raise SettingsError(
                "nvrtc_mode", self.nvrtc_mode, "expected auto, threads or processes"
            )
        if self.workers is None or isinstance(self.workers, int):
            if self.workers is not None:
                check_count("workers", self.workers, 1)
            return
        if not isinstance(self.workers, Mapping):
            raise SettingsError(
                "workers",
                self.workers,
                "must be an int, a mapping of backend names to ints, or None",
            )
        from ..backends import backend_names

        names = backend_names()
        for name, count in self.workers.items():
            if name not in names:
                raise SettingsError(
                    "workers", dict(self.workers),
                    f"{name!r} is not a backend (registered: {', '.join(names)})",
                )  # fmt: skip
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise SettingsError("workers", dict(self.workers), f"{name}: must be an int >= 1")
            named = f"{name}_workers"
            if named in ("nvrtc_workers", "nvcc_workers") and getattr(self, named) is not None:
                raise SettingsError(
                    "workers", dict(self.workers), f"{name} is set by {named} too: give one"
                )
        object.__setattr__(self, "workers", dict(self.workers))

    def count(self, backend: str, setting: str | None = None) -> int | None:
        """The count asked for ``backend`` (``setting``: its own keyword, such as
        ``nvrtc_workers``), ``None`` when none was."""
        named = None if setting is None else getattr(self, setting, None)
        if named is not None:
            return int(named)
        if isinstance(self.workers, int):
            return self.workers
        return None if self.workers is None else self.workers.get(backend)


@dataclass(frozen=True)
class CacheSettings:
    """The result cache of whatever compiles in this process (see
    :mod:`asynccomp.cache`): ``cache=False`` caches nothing; ``cache_dir`` the disk
    tier's folder (``None``: ``$ASYNCCOMP_CACHE_DIR`` or the user cache folder,
    ``False``: memory only); the two tiers' bounds; ``cache_failures``; the remote tier
    (a URL or a :class:`~asynccomp.cache.RemoteCache`; ``None``:
    ``$ASYNCCOMP_REMOTE_CACHE`` if set; ``False``: none).

    >>> CacheSettings(cache_dir="")
    Traceback (most recent call last):
        ...
    asynccomp.errors.SettingsError: invalid cache_dir '': must be a non-empty folder path, ...
    """

    cache: bool = True
    cache_dir: str | os.PathLike[str] | Literal[False] | None = None
    memory_cache_bytes: int = 256 * 2**20
    disk_cache_bytes: int | None = (
        None  # None: $ASYNCCOMP_CACHE_MAX_SIZE, the folder's, 4 GiB; 0: no limit
    )
    cache_failures: bool = False
    remote_cache: str | RemoteCache | Literal[False] | None = None

    def __post_init__(self) -> None:
        check_bool("cache", self.cache)
        check_bool("cache_failures", self.cache_failures)
        if self.cache_dir is not None and self.cache_dir is not False:
            path = check_path(
                "cache_dir", self.cache_dir, "must be a non-empty folder path, None or False"
            )
            object.__setattr__(self, "cache_dir", path)
        check_bytes("memory_cache_bytes", self.memory_cache_bytes)
        if self.disk_cache_bytes is not None:
            check_bytes("disk_cache_bytes", self.disk_cache_bytes)
        remote = self.remote_cache
        if remote is not None and remote is not False and not isinstance(remote, str):
            from ..cache import RemoteCache

            if not isinstance(remote, RemoteCache):
                raise SettingsError(
                    "remote_cache", remote, "must be a URL, a RemoteCache, None or False"
                )
