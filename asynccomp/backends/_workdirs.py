"""Temporary work folders named after the process that made them, and the sweep that
removes those of processes that are gone.

An nvcc job runs in a folder of its own (``asynccomp-nvcc-<pid>-XXXXXXXX`` in the
temporary folder; ``asynccomp-ptxas-...`` for ptxas), and a Ray actor keeps nvcc's
intermediates in another
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
from ._registry import backend_class, backend_names

__all__ = ("make_work_folder", "sweep_work_folders", "work_folder_kinds")

logger = logging.getLogger("asynccomp")


def work_folder_kinds() -> tuple[str, ...]:
    """The kinds of work folder there are: ``"keep"`` (the intermediates a Ray actor
    keeps), and the program of every registered backend that runs one (``nvcc``,
    ``ptxas``: :class:`._tool.ProgramBackend`'s ``tool``). Other folders of asynccomp's
    in the temporary folder (``asynccomp-empty-*``, ``asynccomp-nvrtc-*``) are not
    work folders, and the sweep leaves them."""
    tools = (getattr(backend_class(name), "tool", None) for name in backend_names())
    return ("keep", *sorted({tool for tool in tools if isinstance(tool, str)}))


def make_work_folder(kind: str) -> Path:
    """Blocking: a new private folder ``asynccomp-<kind>-<this pid>-XXXXXXXX`` in the
    temporary folder (``kind``: one of :func:`work_folder_kinds`)."""
    assert kind in work_folder_kinds(), kind
    return Path(tempfile.mkdtemp(prefix=f"asynccomp-{kind}-{os.getpid()}-"))


def sweep_work_folders(root: str | None = None) -> list[str]:
    """Blocking: remove the work folders in ``root`` (default: the temporary folder)
    that belong to this user and to a process no longer running; the names removed."""
    folder = tempfile.gettempdir() if root is None else root
    removed = sweep_ended(
        folder, re.compile(rf"asynccomp-(?:{'|'.join(work_folder_kinds())})-(\d+)-.*")
    )
    if removed:
        logger.info(
            "asynccomp: removed %d work folders of processes that ended (in %s)",
            len(removed),
            Path(folder),
        )
    return removed
