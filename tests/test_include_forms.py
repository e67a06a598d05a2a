"""Every way NVRTC accepts to include a header, by real NVRTC compiles: after the header
is edited, the next compile is never a stale hit. Either the form is tracked (the edit
is a miss, and an unchanged header a hit) or its dependencies are unknown (never
cached). The table says which, so that a form dropping to "unknown" is noticed too."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from asynccomp import CompileJob, SyncEngine

from .kernels import ARCH

KERNEL = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= FACTOR; }\n'
BEFORE, AFTER = "#define FACTOR 2.0f\n", "#define FACTOR 3.0f\n"


@dataclass(frozen=True)
class Form:
    """A source prefix that makes NVRTC read the header ``header`` (relative to the
    case's folder), the options (``{inc}``: the include folder), other files to lay
    out, and whether asynccomp tracks it or calls it unknown."""

    prefix: str
    tracked: bool
    options: tuple[str, ...] = ("-I{inc}",)
    header: str = "inc/f.h"
    files: dict[str, str] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    appears: bool = False  # the edit creates the header rather than changing it


FORMS: dict[str, Form] = {
    "plain": Form('#include "f.h"\n', True),
    "angled": Form("#include <f.h>\n", True),
    "blanks": Form('\t#  include\f  "f.h"\n', True),
    "no blank": Form('#include"f.h"\n', True),
    "comment in the directive": Form('#include /* x */ "f.h"\n', True),
    "comment before the hash": Form('/* x */ #include "f.h"\n', True),
    "comment after the hash": Form('#/* x */include "f.h"\n', True),
    "line comment after": Form('#include "f.h" // "g.h"\n', True),
    "comment over lines in the directive": Form('#include /* a\n b */ "f.h"\n', True),
    "comment over lines before the hash": Form(
        '__device__ int y; /* a\n b */ #include "f.h"\n', True
    ),
    "backslash-newline in the keyword": Form('#inc\\\nlude "f.h"\n', True),
    "backslash-newline before the name": Form('#include \\\n"f.h"\n', True),
    "backslash-CRLF": Form('#include \\\r\n"f.h"\r\n', True),
    "CRLF lines": Form('#define Y 1\r\n#include "f.h"\r\n', True),
    "digraph": Form('%:include "f.h"\n', True),
    "trigraph, C++14": Form('??=include "f.h"\n', True, ("-I{inc}", "-std=c++14")),
    "trigraph backslash, C++14": Form('#include ??/\n"f.h"\n', False, ("-I{inc}", "-std=c++14")),
    "include_next": Form(
        '#include "f.h"\n',
        True,
        ("-I{dir}/first", "-I{dir}/second"),
        header="second/f.h",
        files={"first/f.h": '#include_next "f.h"\n'},
    ),
    "a header's own folder first": Form(
        '#include "sub/a.h"\n',
        True,
        header="inc/sub/f.h",
        files={"inc/sub/a.h": '#include "f.h"\n', "inc/f.h": "#error the -I folder's\n"},
    ),
    "'..' through a link": Form(
        '#include "link/a.h"\n',
        True,
        header="elsewhere/f.h",
        files={
            "elsewhere/real/a.h": '#include "../f.h"\n',
            "inc/f.h": "#error read by the text, not through the link\n",
        },
        links={"inc/link": "elsewhere/real"},
    ),
    "-I dir": Form('#include "f.h"\n', True, ("-I", "{inc}")),
    "-I=dir": Form('#include "f.h"\n', True, ("-I={inc}",)),
    "--include-path dir": Form('#include "f.h"\n', True, ("--include-path", "{inc}")),
    "-include": Form("", True, ("-I{inc}", "-include", "f.h")),
    "-include=": Form("", True, ("-I{inc}", "-include=f.h")),
    "--pre-include=": Form("", True, ("-I{inc}", "--pre-include=f.h")),
    "--pre-include": Form("", True, ("-I{inc}", "--pre-include", "f.h")),
    "__has_include, header appears": Form(
        '#if __has_include("f.h")\n#include "f.h"\n#else\n#define FACTOR 2.0f\n#endif\n',
        True,
        appears=True,
    ),
    "macro": Form('#define H "f.h"\n#include H\n', False),
    "angled macro": Form("#define H <f.h>\n#include H\n", False),
    "stringized macro": Form("#define S(x) #x\n#define XS(x) S(x)\n#include XS(f.h)\n", False),
    "__has_include of a macro": Form(
        '#define H "f.h"\n#if __has_include(H)\n#include "f.h"\n#endif\n', False
    ),
}


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SyncEngine]:
    with SyncEngine(
        arch=ARCH, nvrtc_workers=1, cache_dir=tmp_path_factory.mktemp("cache")
    ) as started:
        yield started


def _write(path: Path, text: str) -> None:
    """Write ``text`` with an mtime in the past (a header modified after its compile
    started is not trusted), distinct for each write."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    _write.clock = getattr(_write, "clock", time.time_ns() - 3600 * 10**9) + 10**9  # type: ignore[attr-defined]
    os.utime(path, ns=(_write.clock, _write.clock))  # type: ignore[attr-defined]


def _lay_out(folder: Path, form: Form) -> CompileJob:
    (folder / "inc").mkdir(parents=True)
    for name, text in form.files.items():
        _write(folder / name, text)
    for name, target in form.links.items():
        (folder / name).symlink_to(folder / target)
    if not form.appears:
        _write(folder / form.header, BEFORE)
    options = [o.format(inc=folder / "inc", dir=folder) for o in form.options]
    return CompileJob(form.prefix + KERNEL, name="forms", options=options)


@pytest.mark.parametrize("name", FORMS)
def test_an_edited_header_is_never_a_stale_hit(
    engine: SyncEngine, tmp_path: Path, name: str
) -> None:
    form = FORMS[name]
    job = _lay_out(tmp_path, form)
    first = engine.compile(job)
    assert first.ok and not first.cached, first.log
    again = engine.compile(job)
    assert again.cached is form.tracked and again.binary == first.binary
    _write(tmp_path / form.header, AFTER)
    edited = engine.compile(job)
    assert edited.ok and not edited.cached, "a stale hit"
    assert edited.binary != first.binary
    unchanged = engine.compile(job)
    assert unchanged.cached is form.tracked and unchanged.binary == edited.binary


def test_the_table_is_what_nvrtc_does(engine: SyncEngine, tmp_path: Path) -> None:
    # The forms the scanner follows conservatively although NVRTC refuses them, and the
    # lines that only look like includes: none of them changes the answer above.
    refused: dict[str, Callable[[Path], str]] = {
        "#import": lambda inc: '#import "f.h"\n',
        "#embed": lambda inc: '#define FACTOR 1.0f\n__device__ char d[] = {\n#embed "f.h"\n};\n',
        "backslash, blank, newline": lambda inc: '#include \\ \n"f.h"\n',
        "trigraph, C++17": lambda inc: '??=include "f.h"\n',
        "# mid-line": lambda inc: '__device__ int y; #include "f.h"\n',
    }
    _write(tmp_path / "inc" / "f.h", BEFORE)
    for label, prefix in refused.items():
        result = engine.compile(
            CompileJob(prefix(tmp_path) + KERNEL, name="forms", options=[f"-I{tmp_path / 'inc'}"])
        )
        assert not result.ok, label
