"""The backends there are, by name: one line each.

A name maps to the module and class that implement it, imported the first time the
name is used (as anyio's ``BACKENDS`` are): this module imports none of them, so the job
model can check a backend's name and options without loading any compiler's code.
Everything asynccomp knows of a backend (its outputs, options, architectures, compiler
identity, cost prior, worker count, how a Ray actor or the compile server makes it) is a
member of its class (:class:`~asynccomp.backends.CompilerBackend`); nothing outside
:mod:`asynccomp.backends` branches on a backend's name.

Adding a backend is a module of ``asynccomp/backends/`` with its class, and its line in
:data:`BACKENDS`.

>>> backend_names()
('nvrtc', 'nvcc', 'ptx', 'nvjitlink')
>>> backend_class("ptx").outputs
('cubin',)
>>> backend_class("clang")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
asynccomp.errors.UnknownBackend: invalid backend 'clang': expected one of nvrtc, nvcc, ptx, ...
"""

from __future__ import annotations

import functools
import importlib
import re
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UnknownBackend

if TYPE_CHECKING:
    from ..toolkit import Toolkit
    from ._base import CompilerBackend

__all__ = (
    "BACKENDS",
    "arch_supported",
    "backend_class",
    "backend_names",
    "compiler_versions",
    "key_identities",
)

#: name -> ``"module:Class"``, in the order reports list them.
BACKENDS: dict[str, str] = {
    "nvrtc": "asynccomp.backends.nvrtc:NvrtcBackend",
    "nvcc": "asynccomp.backends.nvcc:NvccBackend",
    "ptx": "asynccomp.backends.ptx:PtxBackend",
    "nvjitlink": "asynccomp.backends.nvjitlink:NvJitLinkBackend",
}


def backend_names() -> tuple[str, ...]:
    """The registered backends' names."""
    return tuple(BACKENDS)


@functools.cache
def _load(name: str) -> type[CompilerBackend]:
    module, _, cls = BACKENDS[name].partition(":")
    loaded: type[CompilerBackend] = getattr(importlib.import_module(module), cls)
    return loaded


def backend_class(name: object) -> type[CompilerBackend]:
    """The class of the backend registered as ``name``; :class:`~asynccomp.UnknownBackend`
    (an :class:`~asynccomp.InvalidJob`) listing the registered ones for any other name."""
    if not isinstance(name, str) or name not in BACKENDS:
        raise UnknownBackend(name, backend_names())
    return _load(name)


def arch_supported(known: tuple[int, ...], arch: str) -> bool:
    """Whether a compiler whose architecture numbers are ``known`` takes ``arch``
    (``sm_90a``, ``compute_100f``): its number is among them, an ``a`` suffix needs 90
    or more, an ``f`` suffix 100 or more. ``True`` when ``known`` is empty (not asked)."""
    match = re.fullmatch(r"(?:sm|compute)_(\d+)([af]?)", arch)
    if not known or match is None:
        return True
    number, suffix = int(match.group(1)), match.group(2)
    if number not in known:
        return False
    return not ((suffix == "a" and number < 90) or (suffix == "f" and number < 100))


def compiler_versions(toolkit: Toolkit) -> dict[str, str | None]:
    """Each backend's compiler version in ``toolkit`` (``None``: not found), for reports."""
    return {name: backend_class(name).version(toolkit) for name in BACKENDS}


def key_identities(toolkit: Toolkit) -> dict[str, tuple[str, tuple[Path, ...]]]:
    """Each backend's compiler identity and header folders, as cache keys hash them."""
    return {name: backend_class(name).identity(toolkit) for name in BACKENDS}
