"""One precompiled header per header prefix for all the NVRTC workers of a template.

NVRTC's PCH lives in a heap at an address fixed per loaded instance of NVRTC: a PCH
file made by one process is refused by another (warning #20282-D, "incompatible
precompiled header (PCH) heap allocation address"), so by default every worker makes
its own (250-450 MB and 1-3 s each for TileLang's headers) for every prefix it meets.
Workers forked from one template share that address (checked with NVRTC 13.5 here: a
file one fork made, another fork used, whether the heap was set before the fork or
after), so they can share the files:

- A compile with ``-pch`` in a forked worker looks in the pool's shared folder
  (``$ASYNCCOMP_NVRTC_SHARED_PCH``) for ``<template pid>-<pch_key>.pch``. There: it
  compiles with ``--use-pch=`` that file.
- Not there: the first worker to claim ``<...>.lock`` (made exclusively, holding its
  pid) makes it with ``--create-pch=`` a file of its own name, linked to the shared name
  once NVRTC says it made it, so no reader ever sees half a file. NVRTC declining (a
  ``#line`` in the prefix, a heap too small) leaves ``<...>.none``: that prefix goes
  back to each worker's own automatic PCH.
- Another worker's claim in progress: the compile goes without a PCH (faster than
  making a second one: about 1.8 s against 2.7 s for TileLang's headers), and so does
  every compile once :data:`MAX_SHARED` files exist and this prefix has none.
- A claim whose worker died (killed at a timeout) is taken over by the next compile.

The output is the same bytes whichever way a compile goes (a PCH changes how fast the
headers are read, not the code). Spawned workers (no template) and compiles in an
engine's own threads keep NVRTC's automatic PCH in their own folder.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import threading
from pathlib import Path

from .._os import running
from ..workers import template_pid
from ._base import BackendOutput, PreparedCompile
from ._nvrtc_api import compile_prepared

__all__ = ("FOLDER_ENV", "MAX_SHARED", "compile_sharing")

#: Where a pool's workers share their PCH files (set by the pool for its workers).
FOLDER_ENV = "ASYNCCOMP_NVRTC_SHARED_PCH"
#: Shared PCH files a pool keeps at most (each 250-450 MB); prefixes past it compile
#: without a PCH.
MAX_SHARED = 4

_AUTO = ("-pch", "--pch")
_MADE = "creating precompiled header file"
_MISSING = "cannot open precompiled header file"


def _with(prepared: PreparedCompile, *extra: str) -> PreparedCompile:
    """The job with ``-pch`` replaced by ``extra`` (nothing: no PCH at all)."""
    options = tuple(o for o in prepared.options if o not in _AUTO)
    return dataclasses.replace(prepared, options=(*extra, *options))


def _claim(lock: Path) -> bool:
    """Take ``lock`` for this process; one left by a process that died is taken over."""
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            try:
                holder = int(lock.read_text() or 0)
            except (OSError, ValueError):
                return False  # being written: it is someone's
            if holder and running(holder):
                return False
            with contextlib.suppress(FileNotFoundError):
                lock.unlink()  # its maker died making it
            continue
        except OSError:
            return False  # the folder is gone or not writable: no sharing
        with os.fdopen(fd, "w") as out:
            out.write(str(os.getpid()))
        return True
    return False


def compile_sharing(
    prepared: PreparedCompile, key: str | None, cancel: threading.Event | None = None
) -> BackendOutput:
    """Compile ``prepared`` (``key``: its :func:`~._nvrtc_workers.pch_key`) with the PCH
    its siblings share where it can; see the module's doc."""
    folder = os.environ.get(FOLDER_ENV)
    template = template_pid()
    if key is None or not folder or template is None:
        return compile_prepared(prepared, cancel)
    base = Path(folder, f"{template}-{key}")
    pch, lock, none = (base.with_suffix(s) for s in (".pch", ".lock", ".none"))
    if pch.exists():
        out = compile_prepared(_with(prepared, f"--use-pch={pch}"), cancel)
        if out.status == "failed" and _MISSING in out.log:  # removed under it
            out = compile_prepared(_with(prepared), cancel)
        return out
    if none.exists():
        return compile_prepared(prepared, cancel)
    with contextlib.suppress(OSError):
        Path(folder).mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        full = len(list(Path(folder).glob(f"{template}-{'?' * len(key)}.pch"))) >= MAX_SHARED
    except OSError:
        full = True
    if full or not _claim(lock):
        return compile_prepared(_with(prepared), cancel)
    # NVRTC writes a file of this worker's name, linked to the shared name once whole
    # (the log's name stays true); a maker that dies leaves only its own name.
    made = base.with_suffix(f".{os.getpid()}.pch")
    try:
        out = compile_prepared(_with(prepared, f"--create-pch={made}"), cancel)
        if out.status in ("ok", "failed") and _MADE in out.log and made.exists():
            with contextlib.suppress(FileExistsError):
                os.link(made, pch)
        elif out.status in ("ok", "failed"):
            none.touch()  # NVRTC's verdict on this prefix: not again
            made.unlink(missing_ok=True)
        else:  # stopped (a timeout, a cancel): the next compile makes it
            made.unlink(missing_ok=True)
        return out
    finally:
        with contextlib.suppress(OSError):
            lock.unlink()
