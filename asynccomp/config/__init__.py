"""An engine's settings, by mode: where its compiles run, and how its jobs are planned.

Each group of settings is a frozen value object, checked as it is made (no I/O), with
its defaults written once (as httpx's ``Timeout`` and ``Limits``):

- :class:`JobSettings`: how every job is planned and rendered, in every mode: ``arch``,
  ``tvm_fast_path``, ``dump_dir``, ``split_compile``, ``cost_model``;
- where the compiles run, one type per mode, holding the settings that mode uses and no
  other:

  - :class:`InProcess` (the default): this process's workers
    (:class:`WorkerSettings`: ``nvrtc_workers``, ``nvcc_workers``, ``nvrtc_mode``), its
    cache (:class:`CacheSettings`), its toolkit;
  - :class:`OnServer`: this user's compile server (``address``: ``"auto"`` or a
    socket), whose workers, cache and toolkit are its own (``asynccomp serve`` sets
    them);
  - :class:`OnRay`: a Ray cluster's actors (:class:`asynccomp.ray.RayExecutor`:
    address, actors, retries, fallback), this process's cache and toolkit, and worker
    settings only for an executor that may fall back to local workers.

``Engine(...)`` takes them as one mode object (``Engine(arch="sm_90a",
mode=OnServer())``) or as the keyword arguments it has always taken, mapped onto the
mode objects by :class:`EngineConfig` (``server`` picks :class:`OnServer`,
``executor`` :class:`OnRay`): a keyword the picked mode does not use is refused, never
silently ignored, by one set of rules (:mod:`._keywords`) for every door, an engine in
process, on a compile server, on Ray, and the compile server itself
(:func:`server_mode`), which takes no job settings (they are each client's). A bad
setting is a :class:`~asynccomp.SettingsError` naming it:

>>> from asynccomp import Engine
>>> Engine(server="auto", nvrtc_workers=2)
Traceback (most recent call last):
    ...
asynccomp.errors.SettingsError: invalid server 'auto': nvrtc_workers belong to the server: ...
>>> server_mode(arch="sm_90a")
Traceback (most recent call last):
    ...
asynccomp.errors.SettingsError: invalid arch 'sm_90a': arch belong to each client: ...
>>> engine = Engine(arch="sm_90a", mode=InProcess(WorkerSettings(nvrtc_workers=2)))
>>> engine.config == EngineConfig.from_keywords(arch="sm_90a", nvrtc_workers=2)
True
>>> sorted(engine.config.changed())
['arch', 'nvrtc_workers']
"""

from __future__ import annotations

from ._groups import CacheSettings, JobSettings, NvrtcModeSetting, WorkerSettings
from ._keywords import DEFAULTS, JOB_SETTINGS, KEYWORDS, EngineConfig, engine_config, server_mode
from ._modes import InProcess, OnRay, OnServer, RunMode, parse_server

__all__ = (
    "CacheSettings",
    "DEFAULTS",
    "EngineConfig",
    "InProcess",
    "JOB_SETTINGS",
    "JobSettings",
    "KEYWORDS",
    "NvrtcModeSetting",
    "OnRay",
    "OnServer",
    "RunMode",
    "WorkerSettings",
    "engine_config",
    "parse_server",
    "server_mode",
)
