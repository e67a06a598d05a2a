"""``Engine(...)``'s keyword arguments, mapped onto the mode objects: :class:`EngineConfig`.

The keywords are the fields of :class:`JobSettings`, :class:`WorkerSettings`,
:class:`CacheSettings` and the toolkit (:data:`KEYWORDS`, derived from those types:
their defaults are written there once), plus the two that pick the mode: ``server``
(:class:`OnServer`) and ``executor`` (:class:`OnRay`); with neither, :class:`InProcess`.
A keyword the picked mode does not use is refused with a
:class:`~asynccomp.SettingsError` naming it, by the rules of this module alone, for an
engine (:func:`engine_config`) and for a compile server (:func:`server_mode`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import SettingsError
from ._groups import CacheSettings, JobSettings, WorkerSettings, changed
from ._modes import InProcess, OnRay, OnServer, RunMode, parse_server

__all__ = ("DEFAULTS", "EngineConfig", "JOB_SETTINGS", "KEYWORDS", "engine_config", "server_mode")


def _names(kind: type[Any]) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(kind))


def _values(settings: object) -> dict[str, object]:
    return {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}  # type: ignore[arg-type]


#: Settings that decide how jobs are planned and rendered: every mode takes them.
JOB_SETTINGS = _names(JobSettings)
_WORKERS, _CACHE = _names(WorkerSettings), _names(CacheSettings)
#: ``Engine(...)``'s settings, in the order errors list them.
KEYWORDS = (*JOB_SETTINGS, *_WORKERS, "toolkit", *_CACHE, "server", "executor")
#: Each keyword's default, from the one place it is written (``None`` for the toolkit,
#: found as the engine starts, and for the mode keywords: in process).
DEFAULTS: Mapping[str, object] = {
    **_values(JobSettings()),
    **_values(WorkerSettings()),
    "toolkit": None,
    **_values(CacheSettings()),
    "server": None,
    "executor": None,
}


@dataclass(frozen=True)
class EngineConfig:
    """An engine's settings: the job settings and where the compiles run.

    ``Engine(...)``'s keywords make one with :meth:`from_keywords`;
    :meth:`keywords` gives them back.

    >>> config = EngineConfig.from_keywords(arch="sm_90a", nvrtc_workers=4)
    >>> config.mode
    InProcess(workers=WorkerSettings(nvrtc_workers=4, nvcc_workers=None, ...), ...)
    >>> sorted(config.changed())
    ['arch', 'nvrtc_workers']
    >>> EngineConfig.from_keywords(server="auto").mode
    OnServer(address='auto', remote_cache=None)
    """

    job: JobSettings = field(default_factory=JobSettings)
    mode: RunMode = field(default_factory=InProcess)

    def __post_init__(self) -> None:
        if not isinstance(self.job, JobSettings):
            raise SettingsError("job", self.job, "must be a JobSettings")
        if not isinstance(self.mode, (InProcess, OnServer, OnRay)):
            raise SettingsError("mode", self.mode, "must be InProcess, OnServer or OnRay")

    @classmethod
    def from_keywords(cls, **settings: Any) -> EngineConfig:
        """A config from ``Engine(...)``'s keywords (see :func:`engine_config`)."""
        return engine_config(settings)

    def keywords(self) -> dict[str, object]:
        """The ``Engine(...)`` keywords that make this config, every one of them."""
        values = {**DEFAULTS, **_values(self.job)}
        mode = self.mode
        if isinstance(mode, OnServer):
            values.update(server=mode.address, remote_cache=mode.remote_cache)
        else:
            values.update(_values(mode.workers))
            values.update(_values(mode.cache))
            values["toolkit"] = mode.toolkit
            if isinstance(mode, OnRay):
                values["executor"] = mode.executor
        return values

    def changed(self) -> set[str]:
        """The keywords that differ from their defaults (what a caller asked for)."""
        return {name for name, value in self.keywords().items() if value != DEFAULTS[name]}


def _refuse(given: Sequence[str], values: Mapping[str, object], owner: str, how: str) -> None:
    """A :class:`~asynccomp.SettingsError` if any setting was ``given``: they belong to
    ``owner`` in this mode. The error names ``owner`` when it is a setting itself (the
    one that picked the mode), else the first setting given."""
    if given:
        name = owner if owner in values else given[0]
        whose = f"the {owner}" if owner in values else owner
        raise SettingsError(name, values[name], f"{', '.join(given)} belong to {whose}: {how}")


def _refuse_with(given: Sequence[str], values: Mapping[str, object], what: str, how: str) -> None:
    """A :class:`~asynccomp.SettingsError` naming the first setting ``given`` alongside
    ``what`` (a mode object, a runner), which holds where the compiles run."""
    if given:
        raise SettingsError(
            given[0], values[given[0]], f"{', '.join(given)} given with {what}: {how}"
        )


def _full(settings: Mapping[str, object]) -> dict[str, object]:
    unknown = [name for name in settings if name not in DEFAULTS]
    if unknown:
        raise TypeError(f"unknown engine setting(s): {', '.join(unknown)}")
    return {**DEFAULTS, **settings}


def _groups(values: Mapping[str, object]) -> tuple[JobSettings, WorkerSettings, CacheSettings]:
    # Each value checked first, in the order of its group: a bad value is named before
    # any rule of the modes applies.
    job = JobSettings(**{name: values[name] for name in JOB_SETTINGS})  # type: ignore[arg-type]
    workers = WorkerSettings(**{name: values[name] for name in _WORKERS})  # type: ignore[arg-type]
    cache = CacheSettings(**{name: values[name] for name in _CACHE})  # type: ignore[arg-type]
    return job, workers, cache


def _runner_given(
    values: Mapping[str, object], workers: WorkerSettings, cache: CacheSettings
) -> list[str]:
    """The runner settings given: workers, toolkit, cache, and the mode keywords."""
    given = set(InProcess(workers, cache).changed())
    given |= {name for name in ("toolkit", "executor") if values[name] is not None}
    if parse_server(values["server"]) is not None:
        given.add("server")
    return [name for name in KEYWORDS if name in given]


def engine_config(
    settings: Mapping[str, object], *, mode: RunMode | None = None, custom_runner: object = None
) -> EngineConfig:
    """The config ``Engine(**settings, mode=mode, runner=custom_runner)`` runs with.

    - ``server`` (not ``None``/``"off"``) picks :class:`OnServer`: workers, toolkit,
      cache and executor are the server's (refused, naming ``server``), but
      ``remote_cache=False``;
    - else ``executor`` picks :class:`OnRay` (which refuses worker settings unless the
      executor may fall back);
    - else :class:`InProcess`.
    - ``mode`` given: it says all of that, and the keywords other than the job settings
      are refused (naming the first);
    - a runner of one's own (``custom_runner``) runs the compiles as it will: only the
      job settings and ``toolkit`` (what the engine renders jobs with) are taken.

    >>> engine_config({"server": "auto", "nvrtc_workers": 2})
    Traceback (most recent call last):
        ...
    asynccomp.errors.SettingsError: invalid server 'auto': nvrtc_workers belong to the server: ...
    """
    values = _full(settings)
    job, workers, cache = _groups(values)
    given = _runner_given(values, workers, cache)
    if custom_runner is not None:
        if mode is not None:
            raise SettingsError(
                "mode", mode, "a runner of one's own runs the compiles: give a mode or a runner"
            )
        _refuse_with(
            [name for name in given if name != "toolkit"],
            values,
            "runner=...",
            "a runner of one's own runs the compiles as it will (the engine takes the job "
            "settings, and `toolkit`, which it renders jobs with)",
        )
        return EngineConfig(job, InProcess(toolkit=values["toolkit"]))  # type: ignore[arg-type]
    if mode is not None:
        _refuse_with(
            given,
            values,
            f"mode={type(mode).__name__}(...)",
            "the mode object says where the compiles run: set them there, or leave mode=None",
        )
        return EngineConfig(job, mode)
    server = parse_server(values["server"])
    if server is not None:
        # remote_cache=False asks nothing of the server but to start without one.
        exempt = "remote_cache" if cache.remote_cache is False else None
        _refuse(
            [name for name in given if name not in ("server", exempt)],
            {**values, "server": server},
            "server",
            "set them on `asynccomp serve`, or leave server=None to compile in this process",
        )
        return EngineConfig(
            job, OnServer(server, remote_cache=False if cache.remote_cache is False else None)
        )
    toolkit: Any = values["toolkit"]
    if values["executor"] is not None:
        return EngineConfig(job, OnRay(values["executor"], workers, cache, toolkit))  # type: ignore[arg-type]
    return EngineConfig(job, InProcess(workers, cache, toolkit))


def server_mode(**settings: Any) -> InProcess | OnRay:
    """Where a compile server (``asynccomp serve``) compiles, from ``Engine(...)``'s
    keywords: the runner settings only. The job settings are each client's, and a
    server is not on a server: giving one is a :class:`~asynccomp.SettingsError`.

    >>> server_mode(arch="sm_90a")
    Traceback (most recent call last):
        ...
    asynccomp.errors.SettingsError: invalid arch 'sm_90a': arch belong to each client: ...
    """
    values = _full(settings)
    job, _, _ = _groups(values)  # every value checked, before the rule
    client = changed(job)
    if parse_server(values["server"]) is not None:
        client.append("server")
    _refuse(
        client,
        values,
        "each client",
        "set them on each client's Engine (asynccomp serve takes the runner's: "
        "-j, --cache-dir, --ray)",
    )
    mode = engine_config({**settings, "server": None}).mode
    assert isinstance(mode, (InProcess, OnRay))
    return mode
