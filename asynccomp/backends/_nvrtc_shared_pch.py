"""One precompiled header per header prefix for all the NVRTC workers of a template.

NVRTC's PCH lives in a heap at an address fixed per loaded instance of NVRTC: a PCH
file made by one process is refused by another (warning #20282-D, "incompatible
precompiled header (PCH) heap allocation address"), so with NVRTC's automatic PCH every
worker makes its own (250-450 MB and 1-3 s each for TileLang's headers) for every
prefix it meets. Workers forked from one template share that address (checked with
NVRTC 13.5 here: a file one fork made, another fork used, whether the heap was set
before the fork or after), so they can share the files:

- A compile with ``-pch`` in a forked worker looks in the pool's shared folder
  (``$ASYNCCOMP_NVRTC_SHARED_PCH``, beside the worker's own folder) for
  ``<template pid>-<pch_key>.pch``. There: it compiles with ``--use-pch=`` that file,
  and makes none of its own.
- Not there: it makes one (``--create-pch=`` a file in the worker's own folder) as
  NVRTC's automatic PCH would, then publishes it under the shared name: a hard link,
  made once NVRTC says it made the whole file (``nvrtcGetPCHCreateStatus``), so no
  reader sees half of one; the worker's own name goes at once.

So one compile of a batch's first wave makes the PCH, the others compile without one
(``make=False``; the pool decides, :mod:`._nvrtc_workers`: 16 workers making the same
PCH at once took 5.2 s a compile on 16 cores, one without a PCH 3.4 s, for TileLang's
headers), and every compile after the PCH exists, on any worker (one started later, one
recycled, one whose first job had another prefix), uses it instead of making another. A
worker whose NVRTC refuses a shared file anyway (its heap moved when it had to grow)
goes back to NVRTC's automatic PCH for good; past :data:`MAX_SHARED` files of a template
nothing more is published (and those prefixes use the automatic PCH), and the files of
templates that ended are removed as a file is published. Jobs that name a PCH file or
folder of their own share nothing.

The output is the same bytes whichever way a compile goes (a PCH changes how fast the
headers are read, not the code). Spawned workers (no template) and compiles in an
engine's own threads keep NVRTC's automatic PCH in their own folder.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import re
import tempfile
import threading
from pathlib import Path

from .._os import running
from ..workers import template_pid
from ._base import BackendOutput, PreparedCompile
from ._named_files import PCH_FILE_OPTIONS
from ._nvrtc_api import compile_prepared, uses_pch

__all__ = (
    "FOLDER_ENV",
    "MAX_SHARED",
    "compile_sharing",
    "header_prefix",
    "names_shared",
    "pch_key",
)

#: The folder where a pool's workers share their PCH files, beside their own folders
#: (its name; set by the pool for its workers, each of which has a folder of its own
#: as ``$TMPDIR``).
FOLDER_ENV = "ASYNCCOMP_NVRTC_SHARED_PCH"
#: Shared PCH files of one template at most (each 250-450 MB); past it, workers keep
#: their own as NVRTC's automatic PCH does.
MAX_SHARED = 4

_AUTO = ("-pch", "--pch")
# What NVRTC's log says (NVRTC 12.8 to 13.5).
_MADE = "creating precompiled header file"
_MISSING = "cannot open precompiled header file"
_REFUSED = "incompatible precompiled header (PCH) heap allocation address"
_SHARED_NAME = re.compile(r"(\d+)-[0-9a-f]+\.pch")
_refused = False  # this worker's NVRTC refused a shared file: it shares no more


def header_prefix(source: str) -> str:
    """The source's leading preprocessor lines (with blank and ``//`` comment lines): the
    part an automatic precompiled header covers (NVRTC stops at the first other token).

    >>> header_prefix('#include <a.h>\\n\\n// x\\n#include <b.h>\\nint k;\\n#include <c.h>\\n')
    '#include <a.h>\\n\\n// x\\n#include <b.h>\\n'
    """
    end = 0
    continued = False
    for line in source.splitlines(keepends=True):
        text = line.strip()
        if not (continued or not text or text.startswith(("#", "//"))):
            break
        continued = text.endswith("\\")
        end += len(line)
    return source[:end]


def pch_key(prepared: PreparedCompile) -> str | None:
    """Which precompiled header a compile needs: its options and header prefix (NVRTC
    makes a new PCH when either differs); ``None`` for a compile without ``-pch``. The
    program name does not matter (NVRTC reuses a PCH across names: checked)."""
    if prepared.backend != "nvrtc" or not uses_pch(prepared.options):
        return None
    digest = hashlib.sha256()
    for option in prepared.options:
        digest.update(option.encode("utf-8", "surrogateescape") + b"\0")
    digest.update(header_prefix(prepared.source).encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:20]


def _with(prepared: PreparedCompile, *extra: str) -> PreparedCompile:
    """The job with ``-pch`` replaced by ``extra``."""
    options = tuple(o for o in prepared.options if o not in _AUTO)
    return dataclasses.replace(prepared, options=(*extra, *options))


def _shareable(options: tuple[str, ...]) -> bool:
    """NVRTC's automatic PCH and nothing that names a PCH file or folder of its own."""
    return any(o in _AUTO for o in options) and not any(
        o.startswith(PCH_FILE_OPTIONS) for o in options
    )


def _own_name(key: str) -> str:
    """The file a worker makes a PCH in, in its own folder, before sharing it."""
    return f"asynccomp-{key}.pch"


def names_shared(log: str, key: str, folder: Path) -> bool:
    """Whether a compile's log (of a job whose :func:`pch_key` is ``key``) names a PCH
    made to be shared, or one shared in ``folder``: no worker holds it as its own."""
    return str(folder) in log or _own_name(key) in log


def compile_sharing(
    prepared: PreparedCompile,
    key: str | None,
    cancel: threading.Event | None = None,
    *,
    make: bool = True,
) -> BackendOutput:
    """Compile ``prepared`` (``key``: its :func:`pch_key`) with the PCH its siblings
    share where there is one, else publish the one it makes (``make=False``: compile
    without a PCH instead, while a sibling makes it); see the module's doc."""
    global _refused
    name = os.environ.get(FOLDER_ENV)
    template = template_pid()
    if key is None or not name or template is None or _refused or not _shareable(prepared.options):
        return compile_prepared(prepared, cancel)
    own = Path(tempfile.gettempdir())
    shared = own.parent / name / f"{template}-{key}.pch"
    if shared.exists():
        out = compile_prepared(_with(prepared, f"--use-pch={shared}"), cancel)
        if _REFUSED in out.log:  # compiled without it; this worker's NVRTC moved its heap
            _refused = True  # (grown past the template's): the automatic PCH from now on
        elif out.status == "failed" and _MISSING in out.log:  # removed under it
            out = compile_prepared(prepared, cancel)
        return out
    if not make:
        return compile_prepared(_with(prepared), cancel)
    if _published(shared.parent, template) >= MAX_SHARED:
        return compile_prepared(prepared, cancel)  # NVRTC's automatic PCH, this worker's
    # Made as a file (in the worker's own folder), not with NVRTC's automatic -pch: a PCH
    # is used only with the options it was made with (#629-D otherwise), and its users
    # name it with --use-pch. Once linked, the shared name alone keeps it.
    made = own / _own_name(key)
    made.unlink(missing_ok=True)
    created: list[bool] = []
    out = compile_prepared(_with(prepared, f"--create-pch={made}"), cancel, created)
    if out.status == "ok" and created == [True] and made.exists():
        _publish(made, shared, template)
    made.unlink(missing_ok=True)
    return out


def _published(folder: Path, template: int) -> int:
    """How many files ``template``'s workers share."""
    try:
        return sum(1 for f in folder.glob(f"{template}-*.pch") if _SHARED_NAME.fullmatch(f.name))
    except OSError:
        return 0


def _publish(made: Path, shared: Path, template: int) -> None:
    """Link ``made`` as ``shared`` (under the bound), removing ended templates' files."""
    with contextlib.suppress(OSError):
        shared.parent.mkdir(mode=0o700, exist_ok=True)
        mine = 0
        for file in shared.parent.iterdir():
            match = _SHARED_NAME.fullmatch(file.name)
            if match is None:
                continue
            owner = int(match.group(1))
            if owner == template:
                mine += 1
            elif not running(owner):  # no worker of an ended template is left to use it
                file.unlink(missing_ok=True)
        if mine < MAX_SHARED:
            os.link(made, shared)  # whole: NVRTC has finished writing it
