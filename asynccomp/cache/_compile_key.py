"""The cache key of a rendered compile: what of a :class:`PreparedCompile` the key
recipe (:func:`~asynccomp.cache.cache_key`, :mod:`._keys`) hashes.

- the source text exactly as the compiler receives it;
- its program (file) name, but only when the name can reach the output: line or debug
  info among the options, or ``__FILE__`` (or ``assert``, which expands to it,
  ``__builtin_FILE``, ``source_location``, or a token paste, which can spell it) in the
  source. Otherwise identical sources under different job names share one entry, and
  one compile in flight (the bytes are the same: tested);
- the backend, the output format and the architecture;
- the final option list (NVRTC's options, or nvcc's whole argv, nvcc's path included),
  with the paths under ``$ASYNCCOMP_BASE_DIR`` relative to the working folder
  (:mod:`._relocate`);
- the compiler's identity and a fingerprint of the header folders it reads, as the
  caller's ``identities`` says them (a backend's, asked by name: nothing here knows
  which backends there are);
- the cache format version.

Headers read from outside the toolkit are not in the key: each entry lists them with
their digests (:mod:`._freshness`), and a hit whose dependencies changed is a miss.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

from ..backends import PreparedCompile, compiler_info
from ..toolkit import Toolkit
from ._keys import cache_key, include_identity
from ._relocate import relocated_options, spells_a_path

__all__ = (
    "CacheKey",
    "Identities",
    "KeyMaker",
    "compiler_identity",
    "key_identity",
    "name_reaches_output",
    "relocates",
)

#: A backend's name -> (its compiler's identity, the header folders it reads).
Identities = Callable[[str], tuple[str, Sequence[Path]]]

_NAME_IN_OUTPUT_OPTIONS = (
    "-lineinfo",
    "--generate-line-info",
    "-G",
    "--device-debug",
    "-g",
    "--debug",
)


class CacheKey(NamedTuple):
    """What a compile is cached under, and what identical compiles in flight share.

    ``digest``: the key (64 hex digits). ``cwd``: with ``$ASYNCCOMP_BASE_DIR``, the
    working folder whose headers a relocatable entry's dependencies are (one key, two
    trees: each reads its own headers, which only the dependency check compares), so
    two requests share a compile only when both are equal; ``None`` otherwise."""

    digest: str
    cwd: str | None = None


def name_reaches_output(prepared: PreparedCompile) -> bool:
    """Whether the program (file) name can change the output bytes: line or debug info,
    or a source that spells ``__FILE__`` (``assert`` expands to it), ``__builtin_FILE``
    (``source_location``'s) or pastes tokens (see :data:`._relocate.NAME_WORDS`)."""
    options = prepared.options
    if any(o in _NAME_IN_OUTPUT_OPTIONS or o.startswith("-G") for o in options):
        return True
    return spells_a_path(prepared.source)


def relocates(prepared: PreparedCompile) -> bool:
    """Whether the key hashes the paths under ``$ASYNCCOMP_BASE_DIR`` relative to the
    working folder (:mod:`._relocate`): the base folder is set and no path can reach
    the output through the options or the source."""
    return (
        prepared.base_dir is not None
        and prepared.cwd is not None
        and not name_reaches_output(prepared)
    )


def _unnamed(prepared: PreparedCompile) -> tuple[str, ...]:
    """The options with the job's own file names (nvcc's argv names its source, output
    and dependency file) in a form that does not depend on the name."""
    stem = prepared.filename.rsplit(".", 1)[0]
    names = {
        prepared.filename: "<source>",
        prepared.binary_name: "<output>",
        f"{stem}.d": "<depfile>",
    }
    return tuple(names.get(option, option) for option in prepared.options)


def compiler_identity(backend: str, toolkit: Toolkit) -> tuple[str, tuple[Path, ...]]:
    """(identity string, include folders) of the compiler a backend runs: the
    backend's own description (:func:`~asynccomp.backends.compiler_info`)."""
    info = compiler_info(backend, toolkit)
    return info.identity, tuple(Path(h) for h in info.headers)


def key_identity(backend: str, toolkit: Toolkit) -> tuple[str, str]:
    """What a cache key says of the compiler a backend runs: its identity string and
    the fingerprint of the headers it reads (both hashed into every key)."""
    compiler, includes = compiler_identity(backend, toolkit)
    return compiler, include_identity(includes)


class KeyMaker:
    """Keys of rendered compiles, each backend's identity asked once."""

    def __init__(self, identities: Identities) -> None:
        self._identities = identities
        self._known: dict[str, tuple[str, str]] = {}

    def key(self, prepared: PreparedCompile) -> CacheKey:
        ident = self._known.get(prepared.backend)
        if ident is None:
            compiler, folders = self._identities(prepared.backend)
            ident = self._known[prepared.backend] = (compiler, include_identity(folders))
        named = name_reaches_output(prepared)
        relocated = relocates(prepared)
        options = relocated_options(prepared) if relocated else prepared.options
        digest = cache_key(
            source=prepared.source,
            backend=prepared.backend,
            output=prepared.output,
            arch=prepared.arch,
            options=options if named else _unnamed(replace(prepared, options=options)),
            compiler_identity=ident[0],
            include_identity=ident[1],
            program_name=prepared.filename if named else "",
            relocated=relocated,
        )
        return CacheKey(digest, prepared.cwd if prepared.base_dir is not None else None)
