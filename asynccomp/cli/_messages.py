"""How the command line speaks on stderr: each message once, as one line, with one
``asynccomp:`` prefix.

The library says some things twice on purpose (a log line for servers and a warning for
callers: a forged remote entry, for one), and some of its messages carry their own
``asynccomp:`` prefix (for logs read without a logger name). On the command line both
arrive on the same stderr: :func:`one_voice` prints each once.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sys
import traceback
import warnings
from collections.abc import Iterator
from typing import TextIO

from ..errors import AsyncCompWarning, InvalidJob

__all__ = ("StripPrefix", "bare", "in_cli_terms", "one_voice")

#: The command line's flag for each engine setting a user can give it.
_FLAGS = {
    "arch": "--arch",
    "address": "--ray",
    "actors": "--ray-actors",
    "startup_timeout": "--ray-timeout",
    "timeout": "--timeout",
    "dump_dir": "--dump",
    "cache_dir": "--cache-dir",
    "nvrtc_workers": "-j",
    "nvcc_workers": "-j",
}

# Where the library names whose setting it was, in Python ("; Engine(arch=...)").
_PYTHON_OWNER = re.compile(
    r";\s*(?:Engine|RayExecutor)\([^)]*\)(?P<server>, on the compile server)?$"
)

PREFIX = "asynccomp: "


def bare(text: str) -> str:
    """``text`` without the ``asynccomp:`` prefixes it came with."""
    while text.startswith(PREFIX):
        text = text[len(PREFIX) :]
    return text


def in_cli_terms(exc: BaseException) -> str:
    """An error of a setting the command line gave, told with its flag (``--arch
    sm_20: ...``) instead of the library's Python names (``invalid arch 'sm_20': ...;
    Engine(arch=...)``)."""
    text = str(exc)
    if not isinstance(exc, InvalidJob) or exc.field not in _FLAGS:
        return text
    shown = repr(exc.value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    head = f"invalid {exc.field} {shown}: "
    if not text.startswith(head):
        return text
    problem = _PYTHON_OWNER.sub(
        lambda m: " (the compile server's compilers)" if m.group("server") else "",
        text[len(head) :],
    )
    value = exc.value if isinstance(exc.value, str) else shown
    return f"{_FLAGS[exc.field]} {value}: {problem}"


class StripPrefix(logging.Filter):
    """For a log whose format names the logger already (``asynccomp serve``'s)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = bare(record.msg)
        return True


class _Voice(logging.Handler):
    """asynccomp's log lines (warnings and up) and warnings, each distinct line once."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.said: set[str] = set()

    def say(self, kind: str, text: str, stream: TextIO | None = None) -> None:
        line = f"{PREFIX}{kind}: {bare(text)}"
        if line in self.said:
            return
        self.said.add(line)
        print(line, file=stream or sys.stderr)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
            if record.exc_info and record.exc_info[1] is not None:
                # A bug inside asynccomp: its traceback is what a report needs.
                text += "\n" + "".join(traceback.format_exception(*record.exc_info)).rstrip()
            self.say(record.levelname.lower(), text)
        except Exception:  # pragma: no cover - logging's own contract
            self.handleError(record)


@contextlib.contextmanager
def one_voice(*, logs: bool = True) -> Iterator[None]:
    """While a command runs: asynccomp's warnings (and, with ``logs``, its log lines
    of level WARNING and up) on stderr, once each, one ``asynccomp:`` prefix."""
    voice = _Voice()
    logger = logging.getLogger("asynccomp")
    default = warnings.showwarning

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if issubclass(category, AsyncCompWarning):
            voice.say("warning", str(message), file)
        else:
            default(message, category, filename, lineno, file, line)

    with warnings.catch_warnings():
        warnings.showwarning = show
        if logs:
            logger.addHandler(voice)
        try:
            yield
        finally:
            if logs:
                logger.removeHandler(voice)
