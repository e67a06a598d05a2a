"""Whether a disk cache folder can be trusted: who else can write there.

An entry is served as it is read: whoever can write in the cache folder can forge one
(a binary of their own, answered to every later compile of that key). ccache documents
that the cache folder must be trusted; here it is checked as an engine opens its cache,
as ssh checks the folders of its keys, and an untrusted folder is not used
(:class:`~asynccomp.cache.CacheTrustWarning`). What counts as "else" is the umask's
(:mod:`asynccomp._perms`): with the default (077) the cache is the user's alone; a
umask that lets the group write (``002``, ``007``) shares it with the group on purpose,
one that lets everyone write (``000``), with everyone.

Not trusted:

- the cache folder (or its versioned subfolder) writable by a group or by everyone the
  umask does not share with, or owned by another user (root excepted) while the umask
  shares with nobody;
- a folder above it writable by everyone without the sticky bit (``/tmp`` has it), or
  owned by another user (root excepted) while the umask shares with nobody: they could
  move the cache folder away and put one of theirs in its place.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ("untrusted",)


def untrusted(folder: Path, umask: int) -> str | None:
    """Why ``folder`` (a disk cache's versioned folder, inside its root) cannot be
    trusted with ``umask``, or ``None`` when it can. Blocking (a ``stat`` per folder
    up to ``/``); a folder that cannot be looked at is not trusted."""
    uid = os.getuid()
    group_shared = not umask & 0o020
    all_shared = not umask & 0o002
    try:
        path = folder.resolve()
        own = [path, path.parent]  # the versioned folder and the cache folder
        for each in own:
            st = each.stat()
            mode = stat.S_IMODE(st.st_mode)
            if mode & 0o002 and not all_shared:
                return f"{each} can be written by every user (mode {mode:04o})"
            if mode & 0o020 and not (group_shared or all_shared):
                return f"{each} can be written by its group, gid {st.st_gid} (mode {mode:04o})"
            if st.st_uid not in (uid, 0) and not (group_shared or all_shared):
                return f"{each} belongs to another user, uid {st.st_uid}"
        for above in path.parent.parents:
            st = above.stat()
            mode = stat.S_IMODE(st.st_mode)
            if mode & 0o002 and not mode & stat.S_ISVTX and not all_shared:
                return f"{above}, a folder above it, can be written by every user (mode {mode:04o})"
            if st.st_uid not in (uid, 0) and not (group_shared or all_shared):
                return f"{above}, a folder above it, belongs to another user, uid {st.st_uid}"
    except OSError as exc:
        return f"it cannot be looked at ({exc})"
    return None
