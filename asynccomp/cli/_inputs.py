"""What ``asynccomp compile`` reads: its input files, their job names, their options."""

from __future__ import annotations

import errno
import os
import re
import stat
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..backends._base import safe_stem
from ..examples import example_names, example_path

__all__ = (
    "Inputs",
    "compiler_options",
    "find_inputs",
    "read_source",
    "source_options",
    "unique_names",
)

_QUOTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"', re.M)


@dataclass
class Inputs:
    """What a walk over the command line's paths found: the files to compile, and one
    line per input it skipped (``PATH: why``)."""

    files: list[Path] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def find_inputs(paths: Sequence[Path], examples: bool, suffix: str = ".cu") -> Inputs:
    """The files named, and those under the folders named whose name ends in
    ``suffix`` (the backend's sources: ``.cu``, ``.ptx``; ``examples``: the built-in
    kernels too); a file named twice is compiled once.

    Folders are walked as a build tool walks them: links are followed (a link back to a
    folder being walked is a loop, skipped), a folder named ``x.cu`` is a folder, and
    what cannot be used (a folder that cannot be listed, a dangling link, a FIFO or
    device named ``x.cu``) is skipped with a line saying why; nothing is opened before
    it is known to be a regular file. Raises FileNotFoundError for a path on the
    command line that does not exist (a typo, not something to skip)."""
    found = Inputs()
    if examples:
        found.files += [example_path(name) for name in example_names()]
    for path in paths:
        try:
            info = path.stat()
        except OSError as exc:
            if exc.errno == errno.ENOENT and not path.is_symlink():
                raise FileNotFoundError(f"no such file or folder: {path}") from None
            found.skipped.append(f"{path}: {_why(exc)}")
            continue
        if stat.S_ISDIR(info.st_mode):
            _walk(path, suffix, [(info.st_dev, info.st_ino)], set(), found)
        elif stat.S_ISREG(info.st_mode):
            found.files.append(path)
        else:
            found.skipped.append(f"{path}: {_not_regular(info.st_mode)}")
    found.files = list({os.path.realpath(f): f for f in found.files}.values())
    return found


def _walk(
    folder: Path,
    suffix: str,
    ancestors: list[tuple[int, int]],
    walked: set[tuple[int, int]],
    found: Inputs,
) -> None:
    """Add the ``suffix`` files under ``folder`` (``ancestors``: the folders being walked,
    by device and inode, ``folder``'s own last) to ``found``, by name order."""
    walked.add(ancestors[-1])
    try:
        with os.scandir(folder) as listing:
            entries = sorted(listing, key=lambda e: e.name)
    except OSError as exc:
        found.skipped.append(f"{folder}: cannot list this folder ({_why(exc)})")
        return
    for entry in entries:
        path = folder / entry.name
        is_link = False
        try:
            is_link = entry.is_symlink()
            if not is_link and not entry.name.endswith(suffix) and not entry.is_dir():
                continue  # not ours: no stat needed
            info = entry.stat()  # follows a link
        except OSError as exc:
            # A broken link named otherwise was not meant for us; a loop may have been
            # meant as a folder.
            if entry.name.endswith(suffix) or exc.errno == errno.ELOOP or not is_link:
                found.skipped.append(f"{path}: {_why(exc)}")
            continue
        if stat.S_ISDIR(info.st_mode):
            here = (info.st_dev, info.st_ino)
            if here in ancestors:
                found.skipped.append(f"{path}: a link back to a folder being walked (a loop)")
            elif here not in walked:  # a second link to one folder: its files once
                _walk(path, suffix, [*ancestors, here], walked, found)
        elif not entry.name.endswith(suffix):
            continue
        elif stat.S_ISREG(info.st_mode):
            found.files.append(path)
        else:
            found.skipped.append(f"{path}: {_not_regular(info.st_mode)}")


def _why(exc: OSError) -> str:
    """An OSError in the user's terms."""
    if exc.errno == errno.ENOENT:
        return "a link to nothing (its target does not exist)"
    if exc.errno == errno.ELOOP:
        return "a link that leads back to itself (a loop)"
    return exc.strerror or str(exc)


def _not_regular(mode: int) -> str:
    kind = (
        "a FIFO"
        if stat.S_ISFIFO(mode)
        else "a socket"
        if stat.S_ISSOCK(mode)
        else "a device"
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
        else "not a file"
    )
    return f"not a regular file ({kind}), not read"


def read_source(path: Path) -> str:
    """The file's text. Bytes that are not UTF-8 (a Latin-1 comment) are kept as they
    are ("surrogateescape"): the compilers get the file's exact bytes. Opened without
    blocking and checked to be a regular file before it is read (a FIFO put in its
    place since the walk would block the read forever): raises OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb") as file:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, _not_regular(mode))
        data = file.read()
    return data.decode("utf-8", "surrogateescape")


def source_options(path: Path, source: str) -> list[str]:
    """``-I`` the file's own folder when it includes a header by quotes: asynccomp
    compiles text, not the file in its folder (nvcc runs in a folder of its own), so
    ``#include "x.h"`` next to the file is found this way."""
    if _QUOTED_INCLUDE.search(source):
        return [f"-I{path.resolve().parent}"]
    return []


def unique_names(files: Sequence[Path]) -> list[str]:
    """A distinct job (and output file) name per input: its file name without ``.cu``, or,
    for files that share one, their path below the deepest folder they all share, joined
    with ``_`` (``a/k.cu``, ``b/k.cu`` -> ``a_k``, ``b_k``); ``-2``, ``-3``... if needed."""
    stems = [safe_stem(f.stem) for f in files]
    count = Counter(stems)
    names = list(stems)
    for stem, n in count.items():
        if n < 2:
            continue
        group = [i for i, s in enumerate(stems) if s == stem]
        paths = [files[i].resolve().with_suffix("") for i in group]
        common = Path(os.path.commonpath([p.parent for p in paths]))
        for i, path in zip(group, paths, strict=True):
            names[i] = safe_stem("_".join(path.relative_to(common).parts))
    taken: set[str] = set()
    for i, name in enumerate(names):
        candidate, suffix = name, 2
        while candidate in taken:
            candidate, suffix = f"{name}-{suffix}", suffix + 1
        names[i] = candidate
        taken.add(candidate)
    return names


def compiler_options(options: Sequence[str]) -> list[str]:
    """The user's options with ``-I DIR`` / ``-D NAME`` pairs joined into one option and
    relative include folders made absolute (nvcc compiles in a temporary folder)."""
    out: list[str] = []
    pending: str | None = None
    for option in options:
        if pending is not None:
            option, pending = pending + option, None
        elif option in ("-I", "-D", "--include-path", "--define-macro"):
            pending = option + ("=" if option.startswith("--") else "")
            continue
        for prefix in ("-I", "--include-path="):
            if option.startswith(prefix) and len(option) > len(prefix):
                option = prefix + str(Path(option[len(prefix) :]).absolute())
                break
        out.append(option)
    if pending is not None:
        raise ValueError(f"compiler option {pending.rstrip('=')} needs a value")
    return out
