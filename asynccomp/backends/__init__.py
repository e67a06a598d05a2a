"""Compiler backends: one module each, behind :class:`~asynccomp.backends.base.CompilerBackend`.

- :mod:`.nvrtc`: NVRTC through ``cuda.bindings.nvrtc`` in worker threads (cubin, PTX).
- :mod:`.nvcc`: nvcc as concurrent subprocesses (fatbin, cubin, PTX).

Where an option is rendered: ``NvrtcBackend.prepare`` and ``NvccBackend.prepare``.
"""

from __future__ import annotations

from .base import BackendOutput, CompilerBackend, PreparedCompile
from .nvcc import NvccBackend
from .nvrtc import NvrtcBackend

__all__ = ("BackendOutput", "CompilerBackend", "NvccBackend", "NvrtcBackend", "PreparedCompile")
