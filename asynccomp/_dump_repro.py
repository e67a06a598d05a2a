"""What makes a dump folder a reproduction on its own, without the caller's tree.

- ``headers/``: every header outside the toolkit that the compile reads, found the way
  the compile cache finds them (:func:`asynccomp.cache._includes.scan_includes`: the
  ``#include`` lines followed as the compiler resolves them, through the ``-I`` folders
  and the pre-included headers), copied at its absolute path below ``headers/``
  (``/home/me/proj/x.h`` -> ``headers/home/me/proj/x.h``), so that the includes between
  them still resolve. Headers the scan cannot know (``#include MACRO``) are not copied.
- ``rerun.sh`` (a backend that runs a program: nvcc, ptxas) re-runs its argv in the
  folder; ``rerun.py`` (one that calls a library: NVRTC, nvJitLink) calls the same
  library through ``cuda.bindings`` with the same source and options, writes
  ``rerun/<binary>`` and says whether it has the dumped binary's bytes.

Both use the original include folders while every copied header is still there,
unchanged: the compile is then exactly the one asynccomp ran. When one is gone or
changed, they use the copies instead (``-I`` folders below ``headers/``): the same code,
but a dump's compile has line info (``-lineinfo``), whose table names the headers' paths,
so the bytes can differ there (the SASS does not). ``rerun.py --copies`` and
``ASYNCCOMP_RERUN_COPIES=1 sh rerun.sh`` use the copies in any case. The line table also
names the folder the compile ran in: ``rerun.py`` compiles in the same folder when the
engine said which (an engine in process does; NVRTC's worker processes run in an empty
folder of asynccomp's), else in the dump folder.
"""

# String paths on purpose, as the include scan gives them: made absolute and normalised
# by their text (os.path), never resolved through links (Path.resolve).
# ruff: noqa: PTH100, PTH109, PTH117

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path

from ._perms import make_folders, open_new
from .backends import PreparedCompile, backend_class
from .backends._base import FOLDER_OPTIONS, HEADER_OPTIONS
from .backends._rerun import rerun_compiler
from .cache._includes import IncludeSearch, UnknownIncludes, scan_includes
from .toolkit import locate_toolkit

__all__ = ("HEADERS", "copy_local_headers", "rerun_py", "rerun_sh", "with_copies")

#: The dump's folder of copied headers.
HEADERS = "headers"

_PATH_OPTIONS = (*FOLDER_OPTIONS, *HEADER_OPTIONS)


def _path_flags(options: Sequence[str]) -> list[tuple[int, str, str, str]]:
    """``(index, option, prefix, value)`` of each flag that holds a path option's value
    (``-Idir``, ``-I dir``, ``-I=dir``, ``--include-path=dir``, ``-include h``...)."""
    found: list[tuple[int, str, str, str]] = []
    pending: str | None = None
    for index, flag in enumerate(options):
        if pending is not None:
            found.append((index, pending, "", flag))
            pending = None
        elif flag in _PATH_OPTIONS:
            pending = flag
        else:
            name, equals, value = flag.partition("=")
            if equals and name in _PATH_OPTIONS:
                found.append((index, name, name + "=", value))
            elif flag.startswith("-I") and len(flag) > 2:
                found.append((index, "-I", "-I", flag[2:]))
    return found


def _values(prepared: PreparedCompile, value: str) -> list[str]:
    return value.split(",") if backend_class(prepared.backend).comma_lists else [value]


def _toolkit_roots() -> list[str]:
    found = locate_toolkit()
    roots = [*found.include_dirs, *([found.cuda_root] if found.cuda_root else [])]
    return sorted({os.path.realpath(r) for r in roots})


def local_headers(prepared: PreparedCompile) -> list[str]:
    """Blocking: the files outside the toolkit that ``prepared``'s source includes,
    directly or through them (empty when they cannot be known)."""
    if backend_class(prepared.backend).source_suffix != ".cu":
        return []  # PTX includes nothing
    dirs: list[str] = []
    pre: list[str] = []
    for _, option, _, value in _path_flags(prepared.options):
        parts = _values(prepared, value)
        (dirs if option in FOLDER_OPTIONS else pre).extend(p for p in parts if p)
    found, _ = scan_includes(
        prepared.source.encode("utf-8", "surrogateescape"),
        IncludeSearch(dirs, pre),
        _toolkit_roots(),
        prepared.cwd or os.getcwd(),
    )
    return [] if isinstance(found, UnknownIncludes) else found


def _copy_of(path: str) -> str:
    """Where the copy of ``path`` goes, relative to the dump folder."""
    return HEADERS + os.path.normpath(os.path.abspath(path))


def copy_local_headers(folder: Path, prepared: PreparedCompile, umask: int) -> dict[str, str]:
    """Blocking: copy the local headers ``prepared`` reads into ``folder/headers/``;
    original path -> copy (relative to ``folder``). The copies and their folders get
    the modes ``umask`` says (:mod:`asynccomp._perms`), as the rest of the dump. A header
    that cannot be copied (it went away meanwhile) is left out: the rerun then needs
    the original."""
    copies: dict[str, str] = {}
    for path in local_headers(prepared):
        copy = _copy_of(path)
        target = folder / copy
        try:
            make_folders(target.parent, umask)
            with open(path, "rb") as source:
                fd = open_new(target, os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC, umask)
                with os.fdopen(fd, "wb") as kept:
                    shutil.copyfileobj(source, kept)
        except OSError:
            continue
        copies[os.path.abspath(path)] = copy
    return copies


def with_copies(
    prepared: PreparedCompile, copies: dict[str, str], folder: Path, base: str = ""
) -> list[str]:
    """``prepared``'s options with each include folder (and absolute pre-included
    header) that holds a copied header pointed at its copy: ``base`` + its path relative
    to ``folder``."""
    options = list(prepared.options)
    if not copies:
        return options
    for index, option, prefix, value in _path_flags(prepared.options):
        parts = []
        for part in _values(prepared, value):
            mirrored = _copy_of(part) if part and os.path.isabs(part) else None
            if mirrored is not None and (
                (option in FOLDER_OPTIONS and (folder / mirrored).is_dir())
                or (option in HEADER_OPTIONS and (folder / mirrored).is_file())
            ):
                parts.append(base + mirrored)
            else:
                parts.append(part)
        options[index] = prefix + ",".join(parts)
    return options


def rerun_sh(prepared: PreparedCompile, copies: dict[str, str], folder: Path) -> str:
    """``rerun.sh`` of a backend that runs a program: its argv, run in the dump folder
    (with the copied headers when an original is gone or changed)."""
    exact = shlex.join(prepared.options)
    head = (
        "#!/bin/sh\n# Re-run the compile exactly as asynccomp ran it (in this folder).\n"
        'cd "$(dirname "$0")" || exit 1\n'
    )
    if not copies:
        return head + f"exec {exact}\n"
    same = " && ".join(
        f"cmp -s {shlex.quote(original)} {shlex.quote(copy)}" for original, copy in copies.items()
    )
    return (
        head + "# The local headers it read are copied under headers/: when one is gone or\n"
        "# changed (or ASYNCCOMP_RERUN_COPIES=1), the copies are used.\n"
        f'if [ -z "$ASYNCCOMP_RERUN_COPIES" ] && {same}; then\n'
        f"  exec {exact}\n"
        "fi\n"
        f"exec {shlex.join(with_copies(prepared, copies, folder))}\n"
    )


_RERUN_PY = '''\
#!/usr/bin/env python3
"""Re-run the compile of this dump folder ({what}) as asynccomp ran it, and compare
the binary with the dumped one ({binary}).

    python3 rerun.py            # writes rerun/{binary}
    python3 rerun.py --copies   # the same, compiling against the copies under headers/

It needs Python and cuda-bindings with the compiler's library (result.json names the
versions asynccomp used). The local headers the compile read are copied under headers/
at their original paths. While every one of them is still where it was, unchanged, the
compile is exactly asynccomp's; when one is gone or changed, the copies are used: the
same code, but the line table names the copies, so the bytes can differ from the dumped
binary's in it (compare the SASS: cuobjdump -sass).

Exit status: 0 the same binary (or the dumped compile made none either), 1 the compile
failed, 2 it compiled to other bytes.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = {name!r}  # the program's name, as the compiler got it (also the source's file)
# The folder the compile ran in, when the engine said (its line table names it).
COMPILED_IN = {compiled_in!r}
OUTPUT = {output!r}
BINARY = {binary!r}
OPTIONS = {options!r}
# The options with the include folders that hold copied headers pointed at the copies.
COPY_OPTIONS = [o.replace("@DUMP@", HERE) for o in {copy_options!r}]
# original path -> its copy, relative to this folder
HEADERS = {headers!r}
{compile}

def originals_intact():
    for original, copy in HEADERS.items():
        try:
            with open(original, "rb") as mine, open(os.path.join(HERE, copy), "rb") as kept:
                if mine.read() != kept.read():
                    return False
        except OSError:
            return False
    return True


def main(argv):
    copies = "--copies" in argv or not originals_intact()
    if copies and HEADERS:
        print("rerun: compiling against the copies under headers/", file=sys.stderr)
    with open(os.path.join(HERE, NAME), "rb") as file:
        source = file.read()
    os.chdir(COMPILED_IN if COMPILED_IN and os.path.isdir(COMPILED_IN) else HERE)
    binary, log = compile(source, NAME, COPY_OPTIONS if copies else OPTIONS, OUTPUT)
    os.chdir(HERE)
    if log.strip():
        sys.stderr.write(log if log.endswith("\\n") else log + "\\n")
    if binary is None:
        print("rerun: the compile failed", file=sys.stderr)
        return 1
    os.makedirs("rerun", exist_ok=True)
    written = os.path.join("rerun", BINARY)
    with open(written, "wb") as file:
        file.write(binary)
    if not os.path.exists(BINARY):
        print(f"rerun: wrote {{written}} (the dumped compile made no binary)")
        return 0
    with open(BINARY, "rb") as file:
        same = file.read() == binary
    said = "the same" if same else "NOT the same"
    print(f"rerun: wrote {{written}}: {{said}} bytes as {{BINARY}}")
    if not same and copies and HEADERS:
        print("rerun: (its line table names the copies: compare the code, cuobjdump -sass)")
    return 0 if same else 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''


def rerun_py(
    prepared: PreparedCompile, copies: dict[str, str], folder: Path, compiled_in: str | None
) -> str | None:
    """``rerun.py`` of a backend that calls a library, or ``None`` (a backend that
    runs a program gets :func:`rerun_sh`; one without a rerun function gets neither).
    ``compiled_in``: the folder the compile runs in, when known."""
    compile_function = rerun_compiler(prepared.backend)
    if compile_function is None:
        return None
    return _RERUN_PY.format(
        what=f"{prepared.backend}, {prepared.filename} -> {prepared.output} for {prepared.arch}",
        name=prepared.filename,
        output=prepared.output,
        binary=prepared.binary_name,
        options=list(prepared.options),
        compiled_in=compiled_in,
        copy_options=with_copies(prepared, copies, folder, "@DUMP@/"),
        headers=copies,
        compile=compile_function,
    )
