"""Compiler backends: one module each, behind :class:`CompilerBackend`, registered by
name in :mod:`._registry` (one line each).

- :mod:`.nvrtc`: NVRTC through ``cuda.bindings.nvrtc``, in worker processes or threads
  (cubin, PTX).
- :mod:`.nvcc`: nvcc as concurrent subprocesses (fatbin, cubin, PTX).
- :mod:`.ptx`: PTX (Triton's, NVRTC's ``-ptx``, hand-written) to cubin with the
  toolkit's ptxas, as concurrent subprocesses.
- :mod:`.nvjitlink`: the same with nvJitLink, in threads of the process, where it is
  installed (``pip install nvidia-nvjitlink``).

A backend renders a :class:`BackendOptions` and a job into a :class:`PreparedCompile`
(``prepare``), then compiles it (``run``). Where an option is rendered:
``NvrtcBackend.prepare``, ``NvccBackend.prepare`` (``add_shared_options`` for the two
both spell alike), and ``ptx.ptx_flags`` for both PTX backends (``PtxBackend.prepare``
adds ptxas's files), nowhere else. What the rest of asynccomp knows of a backend it asks
its class, found by name with :func:`backend_class`.

The classes are imported when first named (``from asynccomp.backends import
NvrtcBackend``), as the registry imports a backend's module when its name is first
used: the job model checks names and options through the registry without loading any
compiler's code, and nothing here imports the job model back as the package loads.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._registry import (
    BACKENDS,
    BACKENDS_ENV,
    arch_supported,
    backend_class,
    backend_names,
    compiler_info,
    compiler_versions,
    describe_compilers,
    key_identities,
)

if TYPE_CHECKING:
    from ._base import (
        BackendOptions,
        BackendOutput,
        BackendSettings,
        CompilerBackend,
        CompilerInfo,
        PreparedCompile,
    )
    from .nvcc import NvccBackend
    from .nvjitlink import NvJitLinkBackend
    from .nvrtc import NvrtcBackend
    from .ptx import PtxBackend

__all__ = (
    "BACKENDS",
    "BACKENDS_ENV",
    "BackendOptions",
    "BackendOutput",
    "BackendSettings",
    "CompilerBackend",
    "CompilerInfo",
    "NvJitLinkBackend",
    "NvccBackend",
    "NvrtcBackend",
    "PreparedCompile",
    "PtxBackend",
    "arch_supported",
    "backend_class",
    "backend_names",
    "compiler_info",
    "compiler_versions",
    "describe_compilers",
    "key_identities",
)

_LAZY = {
    "BackendOptions": "._base",
    "BackendOutput": "._base",
    "BackendSettings": "._base",
    "CompilerBackend": "._base",
    "CompilerInfo": "._base",
    "PreparedCompile": "._base",
    "NvccBackend": ".nvcc",
    "NvJitLinkBackend": ".nvjitlink",
    "NvrtcBackend": ".nvrtc",
    "PtxBackend": ".ptx",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # once
    return value
