"""An entry's dependencies: recorded after its compile, checked at every hit.

What a compile read outside the toolkit (whose headers the key's include fingerprint
stands for) is recorded in its entry (:mod:`._deps`): what the compiler reported (nvcc's
``-MMD``), or the ``#include`` lines followed as NVRTC resolves them (:mod:`._includes`),
from the folder its compiler looks in first for a quoted include
(:meth:`~asynccomp.backends.CompilerBackend.quote_folder`). With
``$ASYNCCOMP_BASE_DIR`` they are recorded relative to the working folder
(:mod:`._relocate`). A hit is fresh when they are as recorded.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from ..backends import BackendOutput, PreparedCompile
from ..toolkit import Toolkit
from ._compile_key import relocates
from ._deps import Dependency, dependencies_changed, include_dirs_of, scan_includes, snapshot
from ._entry import CacheEntry
from ._relocate import relocated_dependencies, rooted_dependencies

__all__ = ("Recorded", "check_cost", "fresh", "has_dependencies", "record", "toolkit_roots")

#: A compile's dependencies as its cache entry keeps them, and what its metadata says
#: of them (relocatable, or bound to a working folder).
Recorded = tuple[list[Dependency], dict[str, Any]]


def toolkit_roots(toolkit: Toolkit) -> list[str]:
    """The folders the include fingerprint covers: headers under them are not
    dependencies of an entry."""
    roots = [*toolkit.include_dirs]
    if toolkit.cuda_root is not None:
        roots.append(toolkit.cuda_root)
    return sorted({os.path.realpath(r) for r in roots})


def record(
    prepared: PreparedCompile,
    out: BackendOutput,
    *,
    roots: Sequence[str],
    quote_folder: str,
    started_ns: int,
) -> Recorded | None:
    """Blocking: the files the compile read outside ``roots``, as they are now, as its
    entry keeps them; ``None`` when they cannot be known for sure (not cached then)."""
    if out.dependencies is not None:  # the compiler said (nvcc)
        found = [d for d in out.dependencies if not _under(d, roots)]
        absent: list[str] = []
    else:  # NVRTC cannot say: follow the includes
        found, absent = scan_includes(
            prepared.source.encode("utf-8", "surrogateescape"),
            include_dirs_of(prepared.options),
            roots,
            quote_folder,
        )
    deps = snapshot(found, absent, not_before_ns=started_ns)
    if deps is None:
        return None
    return _as_kept(deps, prepared, out, places_known=out.dependencies is None)


def _as_kept(
    deps: list[Dependency], prepared: PreparedCompile, out: BackendOutput, *, places_known: bool
) -> Recorded:
    """The dependencies as the entry records them, and what its metadata says of them.

    ``places_known``: whether ``deps`` also record where an include was looked for and
    not found. Without them (nvcc names only what it read) a copy of the tree with a
    header found earlier in the search would pass every check: bound to its folder."""
    if not relocates(prepared):
        return deps, {}
    if not places_known:
        return deps, {"anchor": prepared.cwd}
    produced = (out.binary or b"", out.log.encode("utf-8", "surrogateescape"))
    return relocated_dependencies(deps, prepared, produced)


def has_dependencies(entry: CacheEntry) -> bool:
    """Whether a hit on ``entry`` needs its dependencies checked (files to look at)."""
    return bool(entry.metadata.get("deps"))


def check_cost(entry: CacheEntry) -> int:
    """At most how many bytes checking ``entry``'s dependencies reads (their recorded
    sizes; only those whose mtime changed are read), without any I/O."""
    recorded = entry.metadata.get("deps")
    if not isinstance(recorded, list):
        return 0
    return sum(
        d[1] for d in recorded if isinstance(d, list) and len(d) in (4, 6) and isinstance(d[1], int)
    )


def fresh(entry: CacheEntry, stopped: Callable[[], bool] | None, cwd: str | None) -> bool:
    """Blocking: whether ``entry``'s dependencies are as recorded (see
    :func:`~asynccomp.cache._deps.dependencies_changed`; raises its ``Stopped`` once
    ``stopped()`` is true), for a lookup from the working folder ``cwd`` (where a
    relocatable entry's dependencies are: :mod:`._relocate`)."""
    recorded = entry.metadata.get("deps")
    if not recorded:
        return True
    try:
        deps = [Dependency.from_json(d) for d in recorded]
    except (TypeError, ValueError):
        return False  # unreadable: not to be trusted
    rooted = rooted_dependencies(deps, entry.metadata, cwd)
    return rooted is not None and not dependencies_changed(rooted, stopped)


def _under(path: str, roots: Sequence[str]) -> bool:
    real = os.path.realpath(path)
    return any(real == root or real.startswith(root + os.sep) for root in roots)
