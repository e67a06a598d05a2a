"""The ``asynccomp`` command line.

``asynccomp compile`` compiles files and folders (or ``--examples``, the built-in
kernels); ``asynccomp bench`` measures how fast a corpus compiles in several
configurations; ``asynccomp serve`` runs the compile server; ``asynccomp cache`` shows
and tends the compile cache; ``asynccomp doctor`` prints the toolkit found. Exit status: 0 all good,
1 a job failed, 2 a usage error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Sequence
from typing import TextIO

from .._version import __version__
from ..errors import AsyncCompWarning
from . import _bench, _cache, _compile, _doctor, _serve

__all__ = ("build_parser", "main")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One line and exit 2, no usage dump: scripts grep this.
        self.exit(2, f"asynccomp: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="asynccomp", description="Compile CUDA kernels in bulk, fast.")
    parser.add_argument("--version", action="version", version=f"asynccomp {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")
    _compile.add_parser(sub)
    _bench.add_parser(sub)
    _doctor.add_parser(sub)
    _serve.add_parser(sub)
    _cache.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command_line = ["asynccomp", *argv]
    # Everything after a lone "--" goes to the compiler untouched (argparse would take
    # "-DX=1" for an option of ours).
    extra: list[str] = []
    if "--" in argv:
        split = argv.index("--")
        argv, extra = argv[:split], argv[split + 1 :]
    parser = build_parser()
    if not argv and not extra:  # a bare `asynccomp`: what it can do
        parser.print_help()
        return 2
    args = parser.parse_args(argv)
    if args.command is None:
        parser.error("a command is needed (compile, bench, serve, cache, doctor)")
    if extra and args.command != "compile":
        parser.error(f"only compile takes compiler options after --, not {args.command}")
    args.extra_options = extra
    args.command_line = command_line
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            code: int = args.run(args)
        sys.stdout.flush()
    except KeyboardInterrupt:
        print("asynccomp: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (| head): no traceback. Python would report the failed
        # flush at exit too, so stdout is pointed at /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return code


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """asynccomp's own warnings as one line, as its errors are (no file, no line)."""
    if issubclass(category, AsyncCompWarning):
        print(f"asynccomp: warning: {message}", file=file or sys.stderr)
    else:
        _default_showwarning(message, category, filename, lineno, file, line)


_default_showwarning = warnings.showwarning


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
