"""asynccomp: compile CUDA kernels in bulk, fast.

An async engine queues many kernel sources and compiles them concurrently through NVRTC
(worker processes) and nvcc (subprocesses), returning binaries, logs, ptxas resource
reports and timings. :class:`SyncEngine` offers the same as blocking calls, and
:mod:`asynccomp.tvm` plugs the engine into TVM as ``tvm_callback_cuda_compile``.

>>> import anyio
>>> from asynccomp import CompileJob, Engine
>>> async def main() -> bool:
...     async with Engine(arch="sm_90a") as engine:
...         result = await engine.compile(CompileJob('extern "C" __global__ void k() {}'))
...     return result.ok
>>> anyio.run(main)
True
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

# First: `python -m asynccomp` must not import a stray ray.py from the working folder
# (importing it drops that entry of sys.path; see the module).
from . import _safe_path as _safe_path
from ._version import __version__ as __version__

if TYPE_CHECKING:
    from .config import EngineConfig
    from .engine import Engine, EngineState, EngineStatistics
    from .errors import (
        ArchitectureNotFound,
        AsyncCompError,
        AsyncCompWarning,
        CacheUnavailable,
        ClusterError,
        ClusterWarning,
        CompileError,
        CompileTimeout,
        DumpDirError,
        EmptyOutput,
        EngineClosed,
        InternalError,
        InvalidJob,
        ResourceLimitWarning,
        ServerError,
        ServerLost,
        ServerWarning,
        SettingsError,
        TaskFailed,
        ToolkitNotFound,
        UnknownBackend,
        WorkerCrashed,
        WorkerStartFailed,
    )
    from .job import CompileJob
    from .ptxas import KernelResources
    from .result import CompileResult
    from .sync import SyncEngine
    from .toolkit import Toolkit, find_toolkit

# The names import their modules when first used (``from asynccomp import Engine``), as
# anyio's and asynccomp.backends' do: a process that needs one part (a worker process of
# asynccomp.workers, forked or spawned by the hundred) pays for that part alone.
_LAZY = {
    "EngineConfig": ".config",
    "Engine": ".engine",
    "EngineState": ".engine",
    "EngineStatistics": ".engine",
    "ArchitectureNotFound": ".errors",
    "AsyncCompError": ".errors",
    "AsyncCompWarning": ".errors",
    "CacheUnavailable": ".errors",
    "ClusterError": ".errors",
    "ClusterWarning": ".errors",
    "CompileError": ".errors",
    "CompileTimeout": ".errors",
    "DumpDirError": ".errors",
    "EmptyOutput": ".errors",
    "EngineClosed": ".errors",
    "InternalError": ".errors",
    "InvalidJob": ".errors",
    "ResourceLimitWarning": ".errors",
    "ServerError": ".errors",
    "ServerLost": ".errors",
    "ServerWarning": ".errors",
    "SettingsError": ".errors",
    "TaskFailed": ".errors",
    "ToolkitNotFound": ".errors",
    "UnknownBackend": ".errors",
    "WorkerCrashed": ".errors",
    "WorkerStartFailed": ".errors",
    "CompileJob": ".job",
    "KernelResources": ".ptxas",
    "CompileResult": ".result",
    "SyncEngine": ".sync",
    "Toolkit": ".toolkit",
    "find_toolkit": ".toolkit",
}


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__} - {"TYPE_CHECKING", "importlib"})


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # once
    return value


__all__ = (
    "ArchitectureNotFound",
    "AsyncCompError",
    "AsyncCompWarning",
    "CacheUnavailable",
    "ClusterError",
    "ClusterWarning",
    "CompileError",
    "CompileJob",
    "CompileResult",
    "CompileTimeout",
    "DumpDirError",
    "EmptyOutput",
    "Engine",
    "EngineClosed",
    "EngineConfig",
    "EngineState",
    "EngineStatistics",
    "InternalError",
    "InvalidJob",
    "KernelResources",
    "ResourceLimitWarning",
    "ServerError",
    "ServerLost",
    "ServerWarning",
    "SettingsError",
    "SyncEngine",
    "TaskFailed",
    "Toolkit",
    "ToolkitNotFound",
    "UnknownBackend",
    "WorkerCrashed",
    "WorkerStartFailed",
    "find_toolkit",
)
