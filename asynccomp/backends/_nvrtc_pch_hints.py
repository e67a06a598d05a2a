"""The precompiled headers a compile server's NVRTC workers made, remembered for the
next server: :class:`PchHints`.

A PCH lives as long as the template its workers forked from (:mod:`._nvrtc_shared_pch`).
A compile server stops after five idle minutes, and takes its PCHs with it: the next
server's first compiles with ``-pch`` each make one again, in every worker at once (for
TileLang's headers: 4.4 s a compile on an H100 against 1.5 s with a PCH; 3.5 s against
1.9 s on 2 cores). So each PCH a server's worker makes leaves a hint
(:attr:`asynccomp.server.ServerPaths.pch_hints`: beside the socket in a server folder the
user chose, else in a folder of the user's own that outlives a login session and a
reboot): the compile's options and header prefix (its ``#include`` lines, none of the
kernel). The next server of that user and toolkit makes the PCHs of the newest
:data:`MAX_AHEAD` hints again as it starts, each with one compile of the prefix and an
empty kernel, and a job that needs one of them meanwhile waits for it: the first jobs
with that prefix and those options find a shared PCH.

A hint is a small JSON file named by its :func:`~._nvrtc_shared_pch.pch_key`, in a
folder that only the server's user may read; a hint that does not
read back is removed, as are those past :data:`MAX_AGE` and the oldest past
:data:`MAX_HINTS`. ``$ASYNCCOMP_PCH_AHEAD=off`` makes none ahead (the test suite's
default: a test's server starts from nothing).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
from pathlib import Path

from ._base import PreparedCompile
from ._nvrtc_shared_pch import header_prefix

__all__ = (
    "AHEAD_ENV",
    "MAX_AGE",
    "MAX_AHEAD",
    "MAX_HINTS",
    "PchHints",
    "ahead_compile",
    "ahead_enabled",
)

#: ``off`` (or ``0``, ``false``, ``no``): no PCH made ahead as a server starts; hints
#: are still kept.
AHEAD_ENV = "ASYNCCOMP_PCH_AHEAD"
#: PCHs made again as a server starts: the newest hints' (one worker each, a few
#: seconds, while the jobs' other workers start as they come).
MAX_AHEAD = 2
#: Hints kept (each a few kB); a hint unused this long is removed.
MAX_HINTS = 8
MAX_AGE = 14 * 86400.0

#: The kernel compiled after a hint's prefix: nothing of anyone's, so the compile is the
#: PCH and little else.
_STUB = 'extern "C" __global__ void asynccomp_pch_ahead() {}\n'
_FIELDS = ("backend", "output", "arch", "filename", "options")


def ahead_compile(prepared: PreparedCompile) -> PreparedCompile:
    """The compile that makes ``prepared``'s PCH and little else: its header prefix and
    options, and an empty kernel (a hint's, or one ``Engine.make_pch`` was given)."""
    return dataclasses.replace(
        prepared,
        source=header_prefix(prepared.source) + _STUB,
        fallback_source=None,
        keep_dir=None,
    )


def ahead_enabled() -> bool:
    """Whether ``$ASYNCCOMP_PCH_AHEAD`` lets a starting server make PCHs ahead (it does
    unless it says ``off``)."""
    from ..config._modes import switched_on  # the words every "off" setting takes

    return switched_on(AHEAD_ENV)


class PchHints:
    """The hints in ``folder`` (made, 0700, at the first one written). Blocking file
    operations: callers on an event loop run them in a thread."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def note(self, prepared: PreparedCompile, key: str) -> None:
        """Remember that a worker made the PCH ``key`` for ``prepared`` (newest now)."""
        path = self.folder / f"{key}.json"
        try:
            os.utime(path)  # known: it is the newest now
            return
        except FileNotFoundError:
            pass
        fields = {name: getattr(prepared, name) for name in _FIELDS}
        fields["prefix"] = header_prefix(prepared.source)
        # The folder it is in is private too (a server's, or the user's own that may
        # become one: asynccomp.server._paths.own_folder).
        self.folder.parent.mkdir(0o700, parents=True, exist_ok=True)
        self.folder.mkdir(0o700, exist_ok=True)
        # Written whole, then renamed: a server starting now reads all of it or none.
        fd, name = tempfile.mkstemp(dir=self.folder, prefix=".", suffix=".tmp")
        temporary = Path(name)
        try:
            with os.fdopen(fd, "w") as out:
                json.dump(fields, out)
            temporary.replace(path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
        for old in self._by_age()[MAX_HINTS:]:
            old.unlink(missing_ok=True)

    def forget(self, key: str) -> None:
        """Remove the hint ``key`` (its prefix no longer compiles: a header gone)."""
        (self.folder / f"{key}.json").unlink(missing_ok=True)

    def ahead(self, limit: int = MAX_AHEAD) -> list[PreparedCompile]:
        """The compiles that make the newest ``limit`` hints' PCHs again (a hint's
        prefix and an empty kernel); hints that do not read back, or are too old, go."""
        jobs: list[PreparedCompile] = []
        for path in self._by_age():
            job = _read(path)
            if job is None:
                path.unlink(missing_ok=True)
            elif len(jobs) < limit:
                jobs.append(job)
        return jobs

    def _by_age(self) -> list[Path]:
        """The hint files, newest first."""

        def age(path: Path) -> float:
            try:
                return -path.stat().st_mtime
            except OSError:
                return 0.0

        try:
            paths = [p for p in self.folder.iterdir() if p.suffix == ".json"]
        except OSError:
            return []
        return sorted(paths, key=age)


def _read(path: Path) -> PreparedCompile | None:
    """The compile that makes the hint's PCH again; ``None``: too old, or not a hint."""
    try:
        if time.time() - path.stat().st_mtime > MAX_AGE:
            return None
        fields = json.loads(path.read_text())
        prefix = fields.pop("prefix")
        options = tuple(fields.pop("options"))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None
    texts = [prefix, *options, *fields.values()]
    if set(fields) != set(_FIELDS) - {"options"} or not all(isinstance(t, str) for t in texts):
        return None
    return PreparedCompile(**fields, options=options, source=prefix + _STUB)
