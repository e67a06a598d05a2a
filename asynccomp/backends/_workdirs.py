"""Temporary work folders named after the process that made them, and the sweep that
removes those of processes that are gone.

An nvcc job runs in a folder of its own (``asynccomp-nvcc-<pid>-XXXXXXXX`` in the
temporary folder), and a Ray actor keeps nvcc's intermediates in another
(``asynccomp-keep-<pid>-XXXXXXXX``); each is removed when its job ends. A process
killed by SIGKILL removes nothing, so every engine (and compile server, and Ray actor)
sweeps, as it starts, the folders of this user whose process is no longer running.

The pid in the name is what tells: a folder whose process is alive, or whose pid a new
process has taken since, is left for later. (Processes of another pid namespace, a
container, sharing this temporary folder would look dead: such a setup should give each
container its own ``TMPDIR``.)
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from pathlib import Path

from .._os import sweep_ended

__all__ = ("make_work_folder", "sweep_work_folders")

logger = logging.getLogger("asynccomp")

_KINDS = ("nvcc", "keep")
_NAME = re.compile(r"asynccomp-(?:nvcc|keep)-(\d+)-.*")


def make_work_folder(kind: str) -> Path:
    """Blocking: a new private folder ``asynccomp-<kind>-<this pid>-XXXXXXXX`` in the
    temporary folder (``kind``: ``"nvcc"`` or ``"keep"``)."""
    assert kind in _KINDS, kind
    return Path(tempfile.mkdtemp(prefix=f"asynccomp-{kind}-{os.getpid()}-"))


def sweep_work_folders(root: str | None = None) -> list[str]:
    """Blocking: remove the work folders in ``root`` (default: the temporary folder)
    that belong to this user and to a process no longer running; the names removed."""
    folder = tempfile.gettempdir() if root is None else root
    removed = sweep_ended(folder, _NAME)
    if removed:
        logger.info(
            "asynccomp: removed %d work folders of processes that ended (in %s)",
            len(removed),
            Path(folder),
        )
    return removed
