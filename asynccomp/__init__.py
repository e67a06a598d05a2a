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

# First: `python -m asynccomp` must not import a stray ray.py from the working folder
# (importing it drops that entry of sys.path; see the module).
from . import _safe_path as _safe_path
from ._version import __version__ as __version__
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
