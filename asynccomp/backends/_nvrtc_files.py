"""What NVRTC leaves on disk, and how none of it outlives its process for long.

NVRTC's automatic precompiled headers (``-pch``) go to ``$TMPDIR/__nvrtc_auto_pch_<pid>_<n>/``
(250-450 MB each for heavy headers) and NVRTC removes them only when its process exits
normally. So:

- every NVRTC worker process gets a folder of its own as ``$TMPDIR``,
  ``<tmp>/asynccomp-nvrtc-<uid>/<engine pid>-<n>/`` (:func:`worker_folders_root`); the
  pool removes it whenever it reaps the worker, killed or not, and a pool removes the
  folders of engines that no longer run (:func:`sweep_worker_folders`: their workers
  died with them) as it starts its first worker and as it closes;
- NVRTC in threads of an engine's own process writes to the process's ``$TMPDIR``; an
  engine killed there leaves NVRTC's folder, so every NVRTC backend's start removes the
  ``__nvrtc_auto_pch_<pid>_<n>`` folders of this user's processes that have ended
  (:func:`sweep_stale_auto_pch`).

A folder whose process still runs (or whose pid a new process took) is left alone.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from pathlib import Path

from .._os import sweep_ended

__all__ = (
    "existing_worker_folders_root",
    "sweep_stale_auto_pch",
    "sweep_worker_folders",
    "worker_folders_root",
)

_FOLDER_NAME = re.compile(r"(\d+)-(\d+)")
_AUTO_PCH_NAME = re.compile(r"__nvrtc_auto_pch_(\d+)_\d+")


def worker_folders_root() -> Path:
    """``<tmp>/asynccomp-nvrtc-<uid>``, this user's (0700), made if needed; where every
    engine's workers get their folders. One taken by someone else is not used: a fresh
    private folder is."""
    root = _shared_root()
    with contextlib.suppress(FileExistsError):
        root.mkdir(0o700)
    if _ours(root):
        return root
    return Path(tempfile.mkdtemp(prefix="asynccomp-nvrtc-"))


def existing_worker_folders_root() -> Path | None:
    """This user's folder of :func:`worker_folders_root` if there is one that is
    usable (``None``: no engine made it, or it is not ours to use); makes nothing."""
    root = _shared_root()
    return root if _ours(root) else None


def _shared_root() -> Path:
    return Path(tempfile.gettempdir(), f"asynccomp-nvrtc-{os.getuid()}")


def _ours(root: Path) -> bool:
    """Whether ``root`` is a folder (not a link) of this user's, private to them."""
    try:
        st = root.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def sweep_worker_folders(root: Path) -> list[str]:
    """Remove the worker folders of engines that are not running (killed before they
    could clean up: their workers died with them); returns the names removed."""
    return sweep_ended(root, _FOLDER_NAME)


def sweep_stale_auto_pch(folder: Path | None = None) -> list[str]:
    """Remove NVRTC's automatic-PCH folders (``__nvrtc_auto_pch_<pid>_<n>``) in
    ``folder`` (default: this process's temporary folder, where NVRTC in this process
    writes them) whose process has ended and that belong to this user; returns the
    names removed."""
    return sweep_ended(folder or tempfile.gettempdir(), _AUTO_PCH_NAME)
