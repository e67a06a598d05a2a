"""The backends there are, by name: one line each.

A name maps to the module and class that implement it, imported the first time the
name is used (as anyio's ``BACKENDS`` are): this module imports none of them, so the job
model can check a backend's name and options without loading any compiler's code.
Everything asynccomp knows of a backend (its outputs, options, architectures, compiler
identity, cost prior, worker count, how a Ray actor or the compile server makes it) is a
member of its class (:class:`~asynccomp.backends.CompilerBackend`); nothing outside
:mod:`asynccomp.backends` branches on a backend's name.

Adding a backend is a module of ``asynccomp/backends/`` with its class, and its line in
:data:`BACKENDS`; a backend of one's own, outside the package, is a line of
``$ASYNCCOMP_BACKENDS`` (``name=module:Class``, comma-separated), which every process of
asynccomp reads (the compile server and the command line too). Nothing else is needed
at any door: worker counts are per backend name (``Engine(workers={"name": 2})``, ``-j
name=2``), and what asynccomp says of its compiler is the class's own
(:meth:`~asynccomp.backends.CompilerBackend.describe`).

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
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UnknownBackend

if TYPE_CHECKING:
    from ..toolkit import Toolkit
    from ._base import CompilerBackend, CompilerInfo

__all__ = (
    "BACKENDS",
    "BACKENDS_ENV",
    "arch_supported",
    "backend_class",
    "backend_names",
    "compiler_info",
    "compiler_versions",
    "describe_compilers",
    "key_identities",
)

#: name -> ``"module:Class"``, in the order reports list them.
BACKENDS: dict[str, str] = {
    "nvrtc": "asynccomp.backends.nvrtc:NvrtcBackend",
    "nvcc": "asynccomp.backends.nvcc:NvccBackend",
    "ptx": "asynccomp.backends.ptx:PtxBackend",
    "nvjitlink": "asynccomp.backends.nvjitlink:NvJitLinkBackend",
}
#: More backends, one's own: ``name=module:Class``, comma-separated.
BACKENDS_ENV = "ASYNCCOMP_BACKENDS"
_NAME = re.compile(r"[a-z][a-z0-9_]*")


def _registered() -> dict[str, str]:
    return _parse(os.environ.get(BACKENDS_ENV, ""), tuple(BACKENDS.items()))


@functools.lru_cache(maxsize=8)
def _parse(lines: str, built_in: tuple[tuple[str, str], ...]) -> dict[str, str]:
    registered = dict(built_in)
    for line in lines.split(","):
        name, equals, where = line.strip().partition("=")
        if not line.strip():
            continue
        if not (equals and _NAME.fullmatch(name) and ":" in where):
            from ..errors import SettingsError

            raise SettingsError(
                BACKENDS_ENV, line, "expected name=module:Class (a lower-case name)"
            )
        registered.setdefault(name, where)
    return registered


def backend_names() -> tuple[str, ...]:
    """The registered backends' names."""
    return tuple(_registered())


@functools.cache
def _load(name: str, where: str) -> type[CompilerBackend]:
    module, _, cls = where.partition(":")
    loaded: type[CompilerBackend] = getattr(importlib.import_module(module), cls)
    return loaded


def backend_class(name: object) -> type[CompilerBackend]:
    """The class of the backend registered as ``name``; :class:`~asynccomp.UnknownBackend`
    (an :class:`~asynccomp.InvalidJob`) listing the registered ones for any other name."""
    registered = _registered()
    if not isinstance(name, str) or name not in registered:
        raise UnknownBackend(name, tuple(registered))
    return _load(name, registered[name])


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


def compiler_info(name: str, toolkit: Toolkit) -> CompilerInfo:
    """What backend ``name`` says of its compiler in ``toolkit``: the toolkit's
    description (a compile server's, carried in its welcome; or made as the toolkit was
    found), else the backend's probe now (blocking)."""
    described = toolkit.described(name)
    return described if described is not None else backend_class(name).describe(toolkit)


def describe_compilers(toolkit: Toolkit) -> tuple[tuple[str, CompilerInfo], ...]:
    """Every registered backend's description of its compiler in ``toolkit`` (blocking:
    each probes its own)."""
    return tuple((name, backend_class(name).describe(toolkit)) for name in backend_names())


def compiler_versions(toolkit: Toolkit) -> dict[str, str | None]:
    """Each backend's compiler version in ``toolkit`` (``None``: not found), for reports."""
    return {name: compiler_info(name, toolkit).version for name in backend_names()}


def key_identities(toolkit: Toolkit) -> dict[str, tuple[str, tuple[Path, ...]]]:
    """Each backend's compiler identity and header folders, as cache keys hash them."""
    identities = {}
    for name in backend_names():
        info = compiler_info(name, toolkit)
        identities[name] = (info.identity, tuple(Path(h) for h in info.headers))
    return identities
