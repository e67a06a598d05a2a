"""Processes as the operating system sees them: one rule for whether a process runs.

Sweeps of folders named after a process (nvcc's work folders, NVRTC's worker folders and
precompiled headers) remove a folder once its process has ended; a zombie has ended (its
work is over, whoever reaps it: a detached server's parent is init, and an init that
reaps lazily keeps a SIGKILLed server a zombie for seconds).
"""

from __future__ import annotations

import os

__all__ = ("running",)


def running(pid: int) -> bool:
    """Whether process ``pid`` (of any user) exists and has not ended."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat_file:
            line = stat_file.read()
    except OSError:
        return True  # no /proc to ask: it exists
    # The name, in parentheses, may hold anything: the state follows the last ")".
    state = line.rpartition(b")")[2].split()[:1]
    return state not in ([b"Z"], [b"X"])
