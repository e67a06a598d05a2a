"""Compiler backends: one module each, behind :class:`CompilerBackend`.

- :mod:`.nvrtc`: NVRTC through ``cuda.bindings.nvrtc``, in worker processes or threads
  (cubin, PTX).
- :mod:`.nvcc`: nvcc as concurrent subprocesses (fatbin, cubin, PTX).

A backend renders a :class:`BackendOptions` and a job into a :class:`PreparedCompile`
(``prepare``), then compiles it (``run``). Where an option is rendered:
``NvrtcBackend.prepare`` and ``NvccBackend.prepare`` (``add_shared_options`` for the
two both spell alike), nowhere else.
"""

from __future__ import annotations

from ._base import BackendOptions, BackendOutput, CompilerBackend, PreparedCompile
from .nvcc import NvccBackend
from .nvrtc import NvrtcBackend

__all__ = (
    "BackendOptions",
    "BackendOutput",
    "CompilerBackend",
    "NvccBackend",
    "NvrtcBackend",
    "PreparedCompile",
)
