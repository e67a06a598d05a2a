"""The ``asynccomp`` command line.

``asynccomp compile`` compiles files and folders (or ``--examples``, the built-in
kernels); ``asynccomp bench`` measures how fast a corpus compiles in several
configurations; ``asynccomp serve`` runs the compile server; ``asynccomp cache`` shows
and tends the compile cache; ``asynccomp doctor`` prints the toolkit found. Exit status: 0 all good,
1 a job failed, 2 a usage error, 3 (compile) inputs skipped, 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import select
import sys
from collections.abc import Sequence
from typing import TextIO

from .._perms import UMASK_ENV
from .._version import __version__
from . import _bench, _cache, _compile, _doctor, _serve
from ._args import unrecognized
from ._messages import one_voice

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


def _options_of(parser: argparse.ArgumentParser, command: str | None) -> list[str]:
    """The long options ``command`` (or the bare ``asynccomp``) takes."""
    chosen = parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            chosen = action.choices[command]
    return [o for o in chosen._option_string_actions if o.startswith("--")]


def _reader_gone(stream: TextIO) -> bool:
    """Whether ``stream`` is a pipe whose reader has closed it (poll says ``POLLERR``)."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(event & select.POLLERR for _, event in poller.poll(0))


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
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        parser.error(unrecognized(unknown, _options_of(parser, args.command)))
    if args.command is None:
        parser.error("a command is needed (compile, bench, serve, cache, doctor)")
    if extra and args.command != "compile":
        parser.error(f"only compile takes compiler options after --, not {args.command}")
    args.extra_options = extra
    args.command_line = command_line
    if getattr(args, "umask", None) is not None:
        # The one place the command's files get their modes from, and a server it
        # starts inherits it (asynccomp._perms).
        os.environ[UMASK_ENV] = f"{args.umask:03o}"
    try:
        # serve logs with a logger of its own (time stamps, for its log file).
        with one_voice(logs=args.command != "serve"):
            code: int = args.run(args)
        sys.stdout.flush()
    except KeyboardInterrupt:
        print("asynccomp: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        if not _reader_gone(sys.stdout):
            # A pipe of our own broke (a worker process's, a server's socket): a real
            # failure, not ``| head``; it must not end silently.
            raise
        # The reader went away (| head): no traceback. Python would report the failed
        # flush at exit too, so stdout is pointed at /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
