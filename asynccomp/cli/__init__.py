"""The ``asynccomp`` command line.

``asynccomp compile`` compiles files and folders (or ``--examples``, the built-in
kernels); ``asynccomp bench`` measures how fast a corpus compiles in several
configurations; ``asynccomp serve`` runs the compile server; ``asynccomp cache`` shows
and tends the compile cache; ``asynccomp doctor`` prints the toolkit found. Exit status: 0 all good,
1 a job failed, 2 a usage error, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import _bench, _cache, _compile, _doctor, _serve

__all__ = ("build_parser", "main")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One line and exit 2, no usage dump: scripts grep this.
        self.exit(2, f"asynccomp: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="asynccomp", description="Compile CUDA kernels in bulk, fast.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
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
    args = parser.parse_args(argv)
    if extra and args.command != "compile":
        parser.error(f"only compile takes compiler options after --, not {args.command}")
    args.extra_options = extra
    args.command_line = command_line
    try:
        code: int = args.run(args)
    except KeyboardInterrupt:
        print("asynccomp: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
