"""The ``asynccomp`` command line.

``asynccomp compile`` compiles files and folders (or ``--examples``, the built-in
kernels); ``asynccomp doctor`` prints the toolkit found. Exit status: 0 all good, 1 a job failed,
2 a usage error.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from . import compile as compile_command
from . import doctor

__all__ = ("main",)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        # One line and exit 2, no usage dump: scripts grep this.
        self.exit(2, f"asynccomp: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="asynccomp", description="Compile CUDA kernels in bulk, fast.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    compile_command.add_parser(sub)
    doctor.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
