"""The kernels a benchmark reads: the built-in examples, or a ``--corpus`` folder.

Every script's default is the built-in examples (``asynccomp/examples``, 41 TVM-style
kernels that ship with asynccomp), so each one runs from a fresh checkout. ``--corpus
DIR`` reads a folder's ``*.cu`` files instead, such as the 60 MetaSchedule candidates of
the README's headline numbers, which ``python -m benchmarks.corpus.make_corpus --out
corpus`` generates (``corpus/`` at the checkout's root is in ``.gitignore``). A folder
that is missing or holds no ``.cu`` file ends the script with one line saying how to
make it.

This module imports nothing from asynccomp at the top, since ``make_corpus`` runs in a
TVM venv that may not have asynccomp's dependencies.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

__all__ = (
    "CORPUS_HELP",
    "add_corpus_argument",
    "check_corpus",
    "corpus_files",
    "largest_files",
    "make_corpus_command",
    "missing_corpus_line",
)

CORPUS_HELP = (
    "folder of .cu files (default: the built-in examples); the README's corpus is made by "
    "`python -m benchmarks.corpus.make_corpus --out corpus`"
)


def make_corpus_command(folder: Path | str) -> str:
    """The command that generates the benchmark corpus into ``folder``."""
    return f"python -m benchmarks.corpus.make_corpus --out {folder}"


def add_corpus_argument(parser: argparse.ArgumentParser) -> None:
    """``--corpus DIR``, default ``None`` (the built-in examples)."""
    parser.add_argument("--corpus", type=Path, default=None, metavar="DIR", help=CORPUS_HELP)


def missing_corpus_line(folder: Path) -> str | None:
    """The one line to print when ``folder`` cannot serve as a corpus, else ``None``."""
    if not folder.is_dir():
        problem = "no such folder"
    elif not any(folder.glob("*.cu")):
        problem = "no .cu files in it"
    else:
        return None
    return (
        f"corpus {folder}: {problem}; make it with `{make_corpus_command(folder)}` "
        "(TVM 0.27 in a venv, see its --help), or leave out --corpus for the built-in examples"
    )


def check_corpus(folder: Path | None) -> None:
    """Exit (status 2) with one line on stderr when ``folder`` is given and not a corpus."""
    if folder is None:
        return
    line = missing_corpus_line(folder)
    if line is not None:
        print(line, file=sys.stderr)
        raise SystemExit(2)


def corpus_files(folder: Path | None) -> list[Path]:
    """The ``*.cu`` files of ``folder`` sorted by name, or the built-in examples when
    ``folder`` is ``None``; exits as :func:`check_corpus` does when it is not a corpus."""
    if folder is None:
        from asynccomp.examples import example_names, example_path

        return [example_path(name) for name in example_names()]
    check_corpus(folder)
    return sorted(folder.glob("*.cu"))


def largest_files(folder: Path | None, largest: int = 0) -> list[Path]:
    """:func:`corpus_files`, largest first; the ``largest`` first of them (0: all)."""
    files = sorted(corpus_files(folder), key=lambda f: f.stat().st_size, reverse=True)
    return files[:largest] if largest else files
