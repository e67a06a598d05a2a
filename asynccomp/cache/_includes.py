"""The headers an NVRTC compile reads, found without a preprocessor.

NVRTC cannot say which files a compile read (it accepts none of ``-M``, ``-MD``,
``-MF``), so :func:`scan_includes` reads the source and every header it reaches the way
NVRTC's front end does, and answers "unknown" whenever it cannot be sure: a result whose
dependencies are unknown is not cached, never a stale hit. What NVRTC 13.5 was seen to
do (each form is in ``tests/test_include_forms.py``, compiled by NVRTC):

- lines end at ``\\n`` or ``\\r\\n`` (a lone ``\\r`` is a blank); a backslash right
  before the end of a line joins it to the next (``#inc\\`` / ``lude``), a backslash
  followed by blanks does not; with ``-std=c++03/11/14`` trigraphs are replaced first
  (``??=include``, ``??/`` joins lines), with the default C++17 not: both readings are
  followed when a source holds ``??``;
- comments are blanks, anywhere in a directive (``#include /* x */ "a.h"``,
  ``/* x */ #include``), and a ``#`` right after a comment that spans lines starts a
  directive;
- ``#include``, ``%:include`` (digraph), ``#include_next``; ``#import`` and ``#embed``
  are refused by NVRTC, but followed anyway; ``__has_include("a.h")`` makes the output
  depend on whether ``a.h`` exists, and is followed as an include;
- a quoted name is looked for in the folder of the file that names it (for the source,
  the compiling process's working folder), then in the ``-I`` folders in order; an
  angled one in the ``-I`` folders; ``-include h`` / ``--pre-include=h`` headers are
  read before the source, found as quoted names of the source;
- ``..`` in a name is resolved by the file system (through links), not by the text.

It errs on the side of recording too much: includes under a false ``#if`` are followed
too, ``#include_next`` and ``__has_include`` record every folder on the path, and the
folders searched before the one a header was found in are recorded as not holding it.

The answer is "unknown" for: a name that is a macro (``#include CONFIG_H``,
``__has_include(NAME)``), a header that is not a regular file (a FIFO, a device, a
folder), cannot be read, or is larger than 64 MiB, and a scan past 20,000 files.
"""

# String paths on purpose, as in _deps.py: hundreds of include lines resolved per compile.
# ruff: noqa: PTH116, PTH118, PTH120

from __future__ import annotations

import logging
import os
import re
import stat
from collections.abc import Iterator, Sequence

from ._files import read_regular

__all__ = ("IncludeSearch", "UnknownIncludes", "include_dirs_of", "scan_includes")

logger = logging.getLogger("asynccomp.cache")

#: Headers larger than this make the includes unknown (the digest reads as much).
READ_LIMIT = 64 * 2**20
_MAX_FILES = 20_000

_BLANK = rb"[ \t\f\v\r]"
# Comments, and the literals a comment marker may sit in (kept as they are). A
# character literal is not one after a digit or a letter: 1'000 is a digit separator.
_LEXEME = re.compile(
    rb"(?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))"
    rb'|(?<![A-Za-z0-9_$])(?:u8|[uUL])?R"(?P<delim>[^ ()\\\t\v\f\r\n]{0,16})\(.*?\)(?P=delim)"'
    rb'|"(?:\\.|[^"\\\n])*"'
    rb"|(?<![A-Za-z0-9_$])(?:u8|[uUL])?'(?:\\.|[^'\\\n])*'",
    re.S,
)
_DIRECTIVE_BODY = (
    _BLANK + rb"*(?:#|%:)" + _BLANK + rb"*(include_next|include|import|embed)(?![A-Za-z0-9_$])(.*)"
)
_DIRECTIVE = re.compile(rb"^" + _DIRECTIVE_BODY, re.M)
_DIRECTIVE_AT = re.compile(_DIRECTIVE_BODY)
_NAME = re.compile(_BLANK + rb'*(?:"([^"\n]*)"|<([^>\n]*)>)')
_HAS_INCLUDE = re.compile(rb"(?<![A-Za-z0-9_$])__has_(include_next|include|embed)(?![A-Za-z0-9_$])")
_HAS_ARGUMENT = re.compile(
    _BLANK + rb"*\(" + _BLANK + rb'*(?:"([^"\n]*)"|<([^>\n]*)>)' + _BLANK + rb"*\)"
)
# Where __has_include is named, not called: "#ifdef __has_include", "defined(...)",
# and "#define __has_include(x) 0" (the fallback of headers for older compilers).
_HAS_NAMED = re.compile(
    rb"(?:defined" + _BLANK + rb"*\(?" + _BLANK + rb"*"
    rb"|^"
    + _BLANK
    + rb"*(?:#|%:)"
    + _BLANK
    + rb"*(?:ifdef|ifndef|elifdef|elifndef|undef|define)"
    + _BLANK
    + rb"+)\Z",
    re.M,
)
_TRIGRAPHS = {
    b"=": b"#", b"/": b"\\", b"'": b"^", b"(": b"[", b")": b"]",
    b"!": b"|", b"<": b"{", b">": b"}", b"-": b"~",
}  # fmt: skip
_TRIGRAPH = re.compile(rb"\?\?([=/'()!<>-])")


class IncludeSearch(list[str]):
    """The ``-I`` folders of an option list, in order (the list itself), and the headers
    its ``-include`` / ``--pre-include`` options read before the source."""

    def __init__(self, dirs: Sequence[str] = (), pre_includes: Sequence[str] = ()) -> None:
        super().__init__(dirs)
        self.pre_includes = tuple(pre_includes)


class UnknownIncludes(list[str]):
    """The "found" list :func:`scan_includes` gives when a compile's headers cannot be
    known (empty; ``reason`` says why): :func:`~asynccomp.cache._deps.snapshot` of it is
    ``None``, which the engine takes as "do not cache this result"."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


class _Unknown(Exception):
    pass


def include_dirs_of(options: Sequence[str]) -> IncludeSearch:
    """The include search of an NVRTC option list: ``-Idir``, ``-I dir``, ``-I=dir``,
    ``--include-path=dir``, ``--include-path dir``; ``-include h``, ``-include=h``,
    ``--pre-include=h``, ``--pre-include h``."""
    dirs: list[str] = []
    pre: list[str] = []
    pending: list[str] | None = None
    for option in options:
        if pending is not None:
            pending.append(option)
            pending = None
        elif option in ("-I", "--include-path"):
            pending = dirs
        elif option in ("-include", "--pre-include"):
            pending = pre
        elif option.startswith(("--include-path=", "-include=", "--pre-include=")):
            (dirs if option.startswith("--include-path=") else pre).append(option.split("=", 1)[1])
        elif option.startswith("-I"):
            value = option[2:]
            dirs.append(value[1:] if value.startswith("=") else value)  # NVRTC drops the "="
    return IncludeSearch(dirs, pre)


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _lines(text: bytes) -> bytes:
    """Phase 1 and 2: line ends made ``\\n``, backslash-newlines removed."""
    return text.replace(b"\r\n", b"\n").replace(b"\\\n", b"")


def _without_comments(text: bytes) -> tuple[bytes, list[int]]:
    """``text`` with each comment made one blank, and the offsets (in the result) right
    after the comments that spanned lines (NVRTC starts a directive there too)."""
    pieces: list[bytes] = []
    starts: list[int] = []
    size = done = 0
    for match in _LEXEME.finditer(text):
        if match.lastgroup != "comment":
            continue
        pieces.append(text[done : match.start()])
        size += match.start() - done + 1
        pieces.append(b" ")
        if b"\n" in match.group():
            starts.append(size)
        done = match.end()
    pieces.append(text[done:])
    return b"".join(pieces), starts


def _includes_in(text: bytes) -> Iterator[tuple[bool, str, bool]]:
    """``(quoted, name, every_folder)`` for each include-like use in ``text``, read as
    NVRTC does (after :func:`_lines`); raises :class:`_Unknown` for a computed name."""
    clean, starts = _without_comments(text)
    directives = list(_DIRECTIVE.finditer(clean))
    directives += [m for m in (_DIRECTIVE_AT.match(clean, at) for at in starts) if m]
    for match in directives:
        kind, rest = match.group(1), match.group(2)
        name = _NAME.match(rest)
        if name is None:
            shown = rest.strip()[:60].decode("utf-8", "replace")
            raise _Unknown(f"#{kind.decode()} {shown}: a computed name")
        quoted = name.group(1) is not None
        raw = name.group(1) if quoted else name.group(2)
        yield quoted, raw.decode("utf-8", "surrogateescape"), kind == b"include_next"
    for match in _HAS_INCLUDE.finditer(clean):
        argument = _HAS_ARGUMENT.match(clean, match.end())
        if argument is None:
            line_start = clean.rfind(b"\n", 0, match.start()) + 1
            if _HAS_NAMED.search(clean, line_start, match.start()):
                continue
            raise _Unknown(f"__has_{match.group(1).decode()} of a computed name")
        quoted = argument.group(1) is not None
        raw = argument.group(1) if quoted else argument.group(2)
        yield quoted, raw.decode("utf-8", "surrogateescape"), True


def _readings(text: bytes) -> Iterator[bytes]:
    """The texts NVRTC may see: as written and, when it holds ``??``, with trigraphs
    replaced (NVRTC does so for ``-std=c++14`` and older, not for C++17)."""
    yield _lines(text)
    if b"??" in text:
        yield _lines(_TRIGRAPH.sub(lambda m: _TRIGRAPHS[m.group(1)], text))


class _Scan:
    def __init__(self, dirs: Sequence[str], toolkit: Sequence[str], cwd: str) -> None:
        self.dirs = list(dirs)
        self.toolkit = toolkit
        self.cwd = cwd
        self.found: dict[str, None] = {}
        self.absent: dict[str, None] = {}
        self.pending: list[tuple[bytes, str | None]] = []
        self.seen: set[tuple[int, int]] = set()

    def text(self, text: bytes, folder: str | None) -> None:
        for reading in _readings(text):
            for quoted, name, every in _includes_in(reading):
                self.include(name, quoted, folder, every)

    def include(self, name: str, quoted: bool, folder: str | None, every: bool) -> None:
        bases = ([folder if folder is not None else self.cwd] if quoted else []) + self.dirs
        for base in dict.fromkeys(bases):
            # Not normalised: "l/../a.h" goes through the link "l", as NVRTC's open does.
            path = os.path.join(base, name)
            try:
                st = os.stat(path)
            except (FileNotFoundError, NotADirectoryError):
                if not _under(os.path.realpath(path), self.toolkit):
                    self.absent[path] = None  # searched first: its appearing changes things
                continue
            except (OSError, ValueError) as exc:
                raise _Unknown(f"{path}: {exc}") from None
            if _under(os.path.realpath(path), self.toolkit):
                return  # the toolkit's: covered by its fingerprint
            if not stat.S_ISREG(st.st_mode):
                raise _Unknown(f"{path} is not a regular file")
            if path not in self.found:
                if len(self.found) >= _MAX_FILES:
                    raise _Unknown(f"more than {_MAX_FILES} headers")
                self.found[path] = None
                self.follow(path)
            if not every:
                return

    def follow(self, path: str) -> None:
        try:
            st, data = read_regular(path, READ_LIMIT)
        except OSError as exc:
            raise _Unknown(f"{path}: {exc}") from None
        if (st.st_dev, st.st_ino) not in self.seen:  # the same file by another name
            self.seen.add((st.st_dev, st.st_ino))
            self.pending.append((data, os.path.dirname(path)))


def scan_includes(
    source: bytes,
    include_dirs: Sequence[str],
    toolkit_dirs: Sequence[str],
    cwd: str,
) -> tuple[list[str], list[str]]:
    """``(found, absent)``: the files outside the toolkit that ``source`` includes,
    directly or through them, and the paths searched before each was found.

    ``include_dirs`` is what :func:`include_dirs_of` gives (its ``-include`` headers are
    read first); a plain sequence of folders works too. When the headers cannot be
    known (see the module's notes), ``found`` is an :class:`UnknownIncludes` and
    ``absent`` empty: :func:`~asynccomp.cache._deps.snapshot` then gives ``None``, and
    a ``None`` dependency list is the engine's "do not cache this result" (not in memory,
    on disk or remote). Never a list that misses a header the compile read.
    """
    scan = _Scan(include_dirs, [os.path.realpath(d) for d in toolkit_dirs], cwd)
    pre = include_dirs.pre_includes if isinstance(include_dirs, IncludeSearch) else ()
    try:
        for name in pre:
            scan.include(name, True, None, False)
        scan.text(source, None)
        while scan.pending:
            text, folder = scan.pending.pop()
            scan.text(text, folder)
    except _Unknown as exc:
        logger.debug("asynccomp: not caching a compile: its headers are unknown (%s)", exc)
        return UnknownIncludes(str(exc)), []
    return list(scan.found), [p for p in scan.absent if p not in scan.found]
