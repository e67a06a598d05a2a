"""The user's own folders, kept out of the tests' reach.

A test session points the folders platformdirs gives (``$XDG_CACHE_HOME``,
``$XDG_CONFIG_HOME``, ``$XDG_DATA_HOME``, ``$XDG_STATE_HOME``) at a folder of its own
before any test runs, so that every process a test starts, whatever it copied of the
environment and whenever, finds that one and not the user's: a compile server or a
command line started without ``$ASYNCCOMP_CACHE_DIR`` caches there. (``HOME`` stays: it
also says where ``pip install --user`` put packages, which a test's Python needs.)

At its end the session compares the user's real asynccomp folders with what they held
at its start, and fails naming what was written there: a process started with an
environment of its own making (``env={}``) would still find them through ``HOME``.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import platformdirs

__all__ = ("MARK", "UserDirs", "changes")

#: The folders platformdirs reads on Linux for a user's cache, config, data and state.
_VARIABLES = ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME")

#: Set (to the session's folder) by the process that redirected the user's folders; the
#: processes it starts (pytest-xdist's workers) find them redirected already.
MARK = "ASYNCCOMP_TESTS_USER_DIRS"

Snapshot = dict[str, tuple[int, int]]


def _snapshot(folder: Path) -> Snapshot:
    """Each file under ``folder`` (relative path) with its size and modification time."""
    seen: Snapshot = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = Path(root, name)
            try:
                st = path.lstat()
            except OSError:  # gone meanwhile
                continue
            seen[str(path.relative_to(folder))] = (st.st_size, st.st_mtime_ns)
    return seen


def changes(before: Snapshot, after: Snapshot) -> list[str]:
    """What was made, changed or removed between two snapshots, one line each."""
    lines = [f"written: {name}" for name in sorted(after) if name not in before]
    lines += [
        f"changed: {name}"
        for name in sorted(after)
        if name in before and after[name] != before[name]
    ]
    lines += [f"removed: {name}" for name in sorted(before) if name not in after]
    return lines


@dataclass
class UserDirs:
    """The user's real asynccomp folders and what they held when the session began; the
    session's own folder that stands in for the user's."""

    real: tuple[Path, ...]
    before: tuple[Snapshot, ...]
    session: Path
    saved: dict[str, str | None]

    @classmethod
    def redirect(cls) -> UserDirs | None:
        """Point the user's folders at a new session folder and remember the real ones;
        ``None`` in a process whose parent did that already (an xdist worker)."""
        if os.environ.get(MARK):
            return None
        real = (
            Path(platformdirs.user_cache_dir("asynccomp")),
            Path(platformdirs.user_config_dir("asynccomp")),
        )
        session = Path(tempfile.mkdtemp(prefix="asynccomp-tests-user-"))
        saved = {name: os.environ.get(name) for name in (*_VARIABLES, MARK)}
        for name in _VARIABLES:
            folder = session / name.removeprefix("XDG_").removesuffix("_HOME").lower()
            folder.mkdir()
            os.environ[name] = str(folder)
        os.environ[MARK] = str(session)
        return cls(real, tuple(_snapshot(f) for f in real), session, saved)

    def written(self) -> list[str]:
        """What was written into the user's real folders since :meth:`redirect`."""
        found = []
        for folder, before in zip(self.real, self.before, strict=True):
            found += [f"{line} (in {folder})" for line in changes(before, _snapshot(folder))]
        return found

    def restore(self) -> None:
        """The environment as it was; the session's folder removed."""
        for name, value in self.saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        shutil.rmtree(self.session, ignore_errors=True)
