"""What ``asynccomp compile`` reads: its input files, their job names, their options."""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ..backends._base import safe_stem
from ..examples import example_names, example_path

__all__ = ("compiler_options", "find_inputs", "read_source", "source_options", "unique_names")

_QUOTED_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"', re.M)


def find_inputs(paths: Sequence[Path], examples: bool) -> list[Path]:
    """The ``.cu`` files named, and under the folders named (``examples``: the built-in
    kernels too); a file named twice is compiled once. Raises FileNotFoundError."""
    files: list[Path] = []
    if examples:
        files += [example_path(name) for name in example_names()]
    for path in paths:
        if path.is_dir():
            files += sorted(path.rglob("*.cu"))
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"no such file or folder: {path}")
    files = list({f.resolve(): f for f in files}.values())
    if not files:
        raise FileNotFoundError("nothing to compile: give .cu files, folders, or --examples")
    return files


def read_source(path: Path) -> str:
    """The file's text. Bytes that are not UTF-8 (a Latin-1 comment) are kept as they
    are ("surrogateescape"): the compilers get the file's exact bytes."""
    return path.read_bytes().decode("utf-8", "surrogateescape")


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
