"""Cache keys that do not depend on where a tree is: ccache's ``base_dir``.

The options of a compile name folders by absolute path: the caller's working folder
(added as ``-I`` when the source has a quoted include), the file's own folder, relative
``-I`` folders made absolute. So the same sources and headers compiled from another
folder, or from a copy of the tree, miss. With ``$ASYNCCOMP_BASE_DIR`` set, as ccache
does with its ``base_dir``, every absolute path under that folder is hashed relative to
the caller's working folder, and the dependencies under it are recorded the same way
and checked where the next lookup's working folder puts them: a copy of a tree,
compiled from the same place in it, hits, but only when every header the compile read
there (and every place its includes were looked for) is the same here.

The binary itself must not name a path for that to be right: when it can (line or
debug info, or a word of :data:`NAME_WORDS` in the source: ``__FILE__``, ``assert``,
``__builtin_FILE``, ``source_location``, a token paste), the key keeps the absolute
paths; when a header read can (it spells one of those words), or the binary or the log
holds a path under the base folder whatever spelled it, the entry is only used from the
working folder that made it.
"""

from __future__ import annotations

# Paths here are strings compared and joined as the compiler's options spell them.
# ruff: noqa: PTH117, PTH118
import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from ..backends import PreparedCompile, backend_class
from ..backends._base import FOLDER_OPTIONS, HEADER_OPTIONS
from ..errors import InvalidJob
from ._deps import Dependency
from ._files import read_regular
from ._includes import READ_LIMIT

__all__ = (
    "BASE_DIR_ENV",
    "NAME_WORDS",
    "base_dir_from_environment",
    "relocated_options",
    "relocated_dependencies",
    "rooted_dependencies",
    "spells_a_path",
)

#: The environment variable naming the base folder (ccache's ``CCACHE_BASEDIR``).
BASE_DIR_ENV = "ASYNCCOMP_BASE_DIR"

_PATH_OPTIONS = (*FOLDER_OPTIONS, *HEADER_OPTIONS)
# Words through which a source or a header can put its path into the binary.
# Plain substring tests: fast on sources of megabytes (a regular expression with these
# alternatives cost 0.6 ms a hit). "assert" also matches static_assert: a conservative
# answer, which only costs sharing. __builtin_FILE() is what source_location::current()
# calls; a token paste ("##", "%:%:") may spell __FILE__ from pieces (CAT(__FI, LE__)).
NAME_WORDS = (
    "__FILE__",
    "__FILE_NAME__",
    "__BASE_FILE__",
    "__builtin_FILE",
    "source_location",
    "assert",
    "##",
    "%:%:",
    "??=",  # the trigraph of "#": "??=??=" pastes with -std=c++14 and older
)
_NAME_BYTES = tuple(word.encode() for word in NAME_WORDS)


def spells_a_path(text: str) -> bool:
    """Whether ``text`` (a source) spells a word of :data:`NAME_WORDS`, also across a
    backslash-newline (``__FI\\`` then ``LE__`` on the next line is ``__FILE__``)."""
    if "\\\n" in text or "\\\r\n" in text:
        text = text.replace("\\\r\n", "").replace("\\\n", "")
    return any(word in text for word in NAME_WORDS)


def _bytes_spell_a_path(data: bytes) -> bool:
    if b"\\\n" in data or b"\\\r\n" in data:
        data = data.replace(b"\\\r\n", b"").replace(b"\\\n", b"")
    return any(word in data for word in _NAME_BYTES)


def base_dir_from_environment() -> str | None:
    """``$ASYNCCOMP_BASE_DIR`` as an absolute, normalised folder (``None``: unset or
    empty); a relative one is an :class:`~asynccomp.InvalidJob`."""
    value = os.environ.get(BASE_DIR_ENV, "").strip()
    if not value:
        return None
    if not os.path.isabs(value):
        raise InvalidJob(BASE_DIR_ENV, value, "must be an absolute folder")
    return os.path.normpath(value)


def _under(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip("/") + "/")


def _relative(path: str, base: str, cwd: str) -> str:
    """``path`` relative to ``cwd`` when it is an absolute path under ``base``."""
    if not os.path.isabs(path):
        return path
    normal = os.path.normpath(path)
    return os.path.relpath(normal, cwd) if _under(normal, base) else path


def relocated_options(prepared: PreparedCompile) -> tuple[str, ...]:
    """The options as the key hashes them: absolute paths under the base folder made
    relative to the caller's working folder, whether an option is the path (nvcc's
    argv) or gives it (``-I/x``, ``-I /x``, ``--include-path=/x``, nvcc's ``-I/x,/y``)."""
    base, cwd = prepared.base_dir, prepared.cwd
    assert base is not None and cwd is not None
    lists = backend_class(prepared.backend).comma_lists
    out: list[str] = []
    for option in prepared.options:
        prefix = ""
        for name in _PATH_OPTIONS:
            if option.startswith(name + "="):
                prefix = name + "="
                break
        else:
            if option.startswith("-I") and len(option) > 2:
                prefix = "-I"
        value = option[len(prefix) :]
        parts = value.split(",") if lists and prefix else [value]
        out.append(prefix + ",".join(_relative(p, base, cwd) for p in parts))
    return tuple(out)


def _names_a_path(path: str) -> bool:
    try:
        _, data = read_regular(path, READ_LIMIT)
    except OSError:
        return True  # cannot be looked at: assume it can
    return _bytes_spell_a_path(data)


def _names_this_tree(produced: Sequence[bytes], base: str, cwd: str) -> bool:
    """Whether the compile's output (its binary, its log) holds an absolute path under
    the base folder: whatever spelled it, a copy's hit would carry this tree's path."""
    root = (base.rstrip("/") + "/" if base != "/" else cwd).encode("utf-8", "surrogateescape")
    return any(root in data for data in produced)


def relocated_dependencies(
    deps: Sequence[Dependency], prepared: PreparedCompile, produced: Sequence[bytes] = ()
) -> tuple[list[Dependency], dict[str, Any]]:
    """Blocking (it reads the headers under the base folder): the dependencies as a
    relocatable entry records them (those under the base folder relative to the working
    folder) and the entry's metadata saying so; or, when such a header can write its
    path into the binary (it spells a word of :data:`NAME_WORDS`), or what the compile
    ``produced`` (its binary and log) holds a path under the base folder, the
    dependencies as they are and the working folder the entry is bound to."""
    base, cwd = prepared.base_dir, prepared.cwd
    assert base is not None and cwd is not None
    if _names_this_tree(produced, base, cwd):
        return list(deps), {"anchor": cwd}
    # Any header read may spell the path (a macro defined outside the base folder that
    # expands __FILE__ in a header under it), not only those under the base folder.
    if any(_names_a_path(d.path) for d in deps if d.digest is not None):
        return list(deps), {"anchor": cwd}
    # replace() keeps ctime and inode: a hit in the tree that made the entry is one stat.
    moved = [dataclasses.replace(d, path=_relative(d.path, base, cwd)) for d in deps]
    return moved, {"relocated": True}


def rooted_dependencies(
    deps: list[Dependency], metadata: Mapping[str, Any], cwd: str | None
) -> list[Dependency] | None:
    """The dependencies to check for a lookup from ``cwd``: a relocatable entry's
    relative paths joined to it; ``None`` when the entry cannot be used from there (it
    is bound to another working folder, or relocatable and the lookup has none)."""
    anchor = metadata.get("anchor")
    if anchor is not None:
        return deps if anchor == cwd else None
    if not metadata.get("relocated"):
        return deps
    if cwd is None:
        return None
    return [
        d if os.path.isabs(d.path) else dataclasses.replace(d, path=os.path.join(cwd, d.path))
        for d in deps
    ]
