"""Argument types shared by the subcommands: each turns a bad value into argparse's own
one-line usage error (exit 2) that names the option."""

from __future__ import annotations

import argparse
import difflib
import math
from collections.abc import Sequence

from .._perms import UMASK_ENV, parse_umask
from ..errors import InvalidJob
from ..job import parse_arch

__all__ = (
    "add_umask",
    "arch",
    "int_list",
    "non_negative_float",
    "non_negative_int",
    "on_off_list",
    "positive_float",
    "positive_int",
    "unrecognized",
    "word_list",
)


def _whole_number(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        raise argparse.ArgumentTypeError(
            f"expected a whole number of {minimum} or more, not {text!r}"
        )
    return value


def positive_int(text: str) -> int:
    return _whole_number(text, 1)


class JobsAction(argparse.Action):
    """``-j N`` (every backend's compiles at once) or ``-j NAME=N`` (one backend's,
    repeatable: ``-j nvrtc=8 -j ptx=2``): an int or a {backend: int} on the namespace,
    ``Engine(workers=...)``'s value."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        text = str(values)
        name, equals, number = text.rpartition("=")
        current = getattr(namespace, self.dest, None)
        try:
            count = _whole_number(number, 1)
        except argparse.ArgumentTypeError as exc:
            raise argparse.ArgumentError(self, str(exc)) from None
        if not equals:
            if isinstance(current, dict):
                raise argparse.ArgumentError(self, "give -j N or -j NAME=N, not both")
            setattr(namespace, self.dest, count)
            return
        from ..backends import backend_names

        if name not in backend_names():
            raise argparse.ArgumentError(
                self, f"{name!r} is not a backend (registered: {', '.join(backend_names())})"
            )
        if isinstance(current, int):
            raise argparse.ArgumentError(self, "give -j N or -j NAME=N, not both")
        setattr(namespace, self.dest, {**(current or {}), name: count})


JOBS_HELP = (
    "compiles at once: N for every backend, or NAME=N for one (repeatable: -j nvrtc=8 "
    "-j ptx=2; default: one per CPU, capped by memory)"
)


def jobs_text(jobs: int | dict[str, int]) -> str:
    """``-j``'s value as a user writes it."""
    if isinstance(jobs, int):
        return str(jobs)
    return " -j ".join(f"{name}={count}" for name, count in jobs.items())


def non_negative_int(text: str) -> int:
    return _whole_number(text, 0)


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, not {text!r}")
    return value


def non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value >= 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a number of seconds, 0 or more, not {text!r}")
    return value


def arch(text: str) -> str:
    try:
        parse_arch(text)
    except InvalidJob:
        raise argparse.ArgumentTypeError(
            f"expected sm_XY or compute_XY with an optional a/f suffix (e.g. sm_90a), not {text!r}"
        ) from None
    return text


def word_list(text: str) -> list[str]:
    """``"a,b, c"`` -> ``["a", "b", "c"]`` (empty items dropped)."""
    return [item.strip() for item in text.split(",") if item.strip()]


def int_list(text: str) -> list[int]:
    """``"1,2,4"`` -> ``[1, 2, 4]``, each 1 or more."""
    items = word_list(text)
    if not items:
        raise argparse.ArgumentTypeError("expected a comma-separated list such as 1,2,4")
    return [positive_int(item) for item in items]


def on_off_list(text: str) -> list[bool]:
    """``"on,off"`` -> ``[True, False]``."""
    values = {"on": True, "off": False}
    items = word_list(text)
    if not items or any(item not in values for item in items):
        raise argparse.ArgumentTypeError(f"expected on, off or on,off, not {text!r}")
    return [values[item] for item in items]


def unrecognized(arguments: Sequence[str], options: Sequence[str]) -> str:
    """argparse's "unrecognized arguments" message, with a "did you mean" for each
    misspelled long option (``--arhc`` -> ``--arch``), as Python 3.12's
    ``suggest_on_error`` does for choices (this runs on 3.10 too)."""
    message = f"unrecognized arguments: {' '.join(arguments)}"
    hints = []
    for argument in arguments:
        if not argument.startswith("--"):
            continue
        name = argument.split("=", 1)[0]
        close = difflib.get_close_matches(name, options, n=1, cutoff=0.75)
        if close:
            hints.append(f"{name}: did you mean {close[0]}?")
    return message + (f" ({'; '.join(hints)})" if hints else "")


def _umask(text: str) -> int:
    try:
        return parse_umask(text, "--umask")
    except InvalidJob as exc:
        raise argparse.ArgumentTypeError(exc.problem) from None


def add_umask(parser: argparse.ArgumentParser) -> None:
    """``--umask``: the modes of what the command writes (and a server it starts), as
    ``$ASYNCCOMP_UMASK``, which it sets (:mod:`asynccomp._perms`)."""
    parser.add_argument(
        "--umask",
        type=_umask,
        default=None,
        metavar="OCTAL",
        help=f"the modes of the files asynccomp writes, as ccache's umask (default: ${UMASK_ENV}, "
        "else 077: private to you; 007 shares the cache and dumps with your group)",
    )
