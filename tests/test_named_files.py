"""Files that options name (R14): change one, and the next compile is a fresh compile
with the new content, or the job is refused with a message saying why; never a cache
hit with the old binary. On the real compilers (asynccomp.backends._named_files)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from asynccomp import CompileJob, Engine, InvalidJob
from asynccomp.backends import NvJitLinkBackend

from .kernels import ARCH, needs_nvcc, needs_ptxas, ptx_kernel, scale_kernel

needs_nvjitlink = pytest.mark.skipif(
    NvJitLinkBackend.version(None) is None, reason="nvJitLink is not installed"
)

# A source that takes V from a file the options name (a header, an options file).
_USES_V = 'extern "C" __global__ void k(int* p) { p[0] = V; }\n'
_INCLUDES_V = '#include <v.h>\nextern "C" __global__ void k(int* p) { p[0] = V; }\n'


class Case:
    """A job whose options name ``file`` (in a test's folder), and the file's two
    contents, each of which gives another binary."""

    def __init__(
        self,
        backend: str,
        source: str,
        options: Callable[[Path], list[str]],
        contents: tuple[str, str],
        file: str = "named.txt",
    ) -> None:
        self.backend, self.source, self.options = backend, source, options
        self.contents, self.file = contents, file


_MAXNTID = ("--maxntid=64\n", "--maxntid=128\n")
_OTHER_PTX = (ptx_kernel(2.0, name="other"), ptx_kernel(3.0, name="other"))
_DEFINES = ("#define V 1\n", "#define V 2\n")

CASES = {
    # ptxas assembles every input it is given into the cubin.
    "ptx positional input": Case("ptx", ptx_kernel(), lambda f: [str(f)], _OTHER_PTX),
    "ptx -v then an input": Case("ptx", ptx_kernel(), lambda f: ["-v", str(f)], _OTHER_PTX),
    "nvjitlink -Xptxas=-optf": Case(
        "nvjitlink", ptx_kernel(), lambda f: [f"-Xptxas=-optf={f}"], _MAXNTID
    ),
    "nvjitlink -Xptxas=input": Case(
        "nvjitlink", ptx_kernel(), lambda f: [f"-Xptxas={f}"], _OTHER_PTX
    ),
    "nvrtc -Xptxas=-optf": Case(
        "nvrtc", scale_kernel(), lambda f: [f"-Xptxas=-optf={f}"], _MAXNTID
    ),
    "nvrtc --ptxas-options=--options-file": Case(
        "nvrtc", scale_kernel(), lambda f: [f"--ptxas-options=--options-file={f}"], _MAXNTID
    ),
    "nvrtc -Xptxas input": Case("nvrtc", scale_kernel(), lambda f: ["-Xptxas", str(f)], _OTHER_PTX),
    "nvcc -Xptxas=-optf": Case("nvcc", scale_kernel(), lambda f: [f"-Xptxas=-optf={f}"], _MAXNTID),
    "nvcc --ptxas-options=--options-file": Case(
        "nvcc", scale_kernel(), lambda f: [f"--ptxas-options=--options-file={f}"], _MAXNTID
    ),
    "nvcc -Xptxas -v,input": Case(
        "nvcc", scale_kernel(), lambda f: ["-Xptxas", f"-v,{f}"], _OTHER_PTX
    ),
    "nvcc -Xcompiler=@file": Case(
        "nvcc", _USES_V, lambda f: [f"-Xcompiler=@{f}"], ("-DV=1\n", "-DV=2\n")
    ),
    # Accounted for: nvcc reports the headers of system folders when asked (-MD).
    "nvcc -isystem": Case(
        "nvcc", _INCLUDES_V, lambda f: ["-isystem", str(f.parent)], _DEFINES, "v.h"
    ),
    "nvcc --system-include=": Case(
        "nvcc", _INCLUDES_V, lambda f: [f"--system-include={f.parent}"], _DEFINES, "v.h"
    ),
    "nvcc -Xcompiler -isystem": Case(
        "nvcc", _INCLUDES_V, lambda f: ["-Xcompiler", f"-isystem,{f.parent}"], _DEFINES, "v.h"
    ),
}

_NEEDS = {"ptx": needs_ptxas, "nvcc": needs_nvcc, "nvjitlink": needs_nvjitlink}


def _params() -> list[object]:
    return [
        pytest.param(case, id=name, marks=[_NEEDS[case.backend]] if case.backend in _NEEDS else [])
        for name, case in CASES.items()
    ]


@pytest.mark.parametrize("case", _params())
async def test_a_changed_named_file_is_a_fresh_compile_or_refused(
    case: Case, tmp_path: Path
) -> None:
    named = tmp_path / "files" / case.file
    named.parent.mkdir()
    named.write_text(case.contents[0])
    try:
        job = CompileJob(case.source, name="k", backend=case.backend, options=case.options(named))
    except InvalidJob as exc:
        # A typed refusal that says why: the key does not cover the file.
        assert "refused" in str(exc) and "cache key" in str(exc), exc
        return
    async with Engine(arch=ARCH, cache_dir=tmp_path / "cache") as engine:
        first = await engine.compile(job)
        assert first.ok, first.log
        named.write_text(case.contents[1])
        second = await engine.compile(job)
    assert second.ok, second.log
    assert not second.cached, "a changed file the options name was answered from the cache"
    assert second.binary != first.binary


@pytest.mark.parametrize(
    ("backend", "option"),
    [
        ("nvrtc", "--use-pch=/tmp/x.pch"),
        ("nvrtc", "--create-pch=/tmp/x.pch"),
        ("nvrtc", "--pch-dir=/tmp"),
        ("nvrtc", "-use-pch=/tmp/x.pch"),  # NVRTC takes the one-dash forms too
        ("nvrtc", "-create-pch=/tmp/x.pch"),
        ("nvrtc", "-pch-dir=/tmp"),
        ("nvcc", "--libdevice-directory=/tmp"),
        ("nvcc", "-Xcompiler=-fplugin=/tmp/p.so"),
        ("nvcc", "-Xcompiler=-specs=/tmp/s"),
        ("ptx", "--options-file=/tmp/o.txt"),
        ("nvjitlink", "-Xptxas=--options-file=/tmp/o.txt"),
    ],
)
def test_options_naming_files_the_key_cannot_cover_are_refused(backend: str, option: str) -> None:
    source = ptx_kernel() if backend in ("ptx", "nvjitlink") else scale_kernel()
    with pytest.raises(InvalidJob, match=r"invalid options .*refused.*cache key"):
        CompileJob(source, backend=backend, options=[option])


@needs_nvcc
async def test_link_only_options_are_taken_and_read_no_file(tmp_path: Path) -> None:
    """A job never links: nvcc does not open what only a link step reads (the files
    named here do not exist), so the options need no refusal."""
    missing = tmp_path / "missing"
    options = [
        f"-Xnvlink=-optf={missing}",
        f"-Xlinker=@{missing}",
        f"-L{missing}",
        "-lnothing_here",
        "--cudart=shared",
    ]
    async with Engine(arch=ARCH, cache=False) as engine:
        result = await engine.compile(CompileJob(scale_kernel(), backend="nvcc", options=options))
    assert result.ok, result.log


@pytest.mark.parametrize(
    "options",
    [
        ["-Xptxas=--maxntid=128,1,1"],  # one ptxas word for NVRTC: no input file in it
        ["-Xptxas", "-maxrregcount=32"],
        ["-Xptxas=-O3"],
    ],
)
def test_ptxas_options_without_files_are_taken(options: list[str]) -> None:
    CompileJob(scale_kernel(), backend="nvrtc", options=options)


@needs_ptxas
def test_ptxas_option_values_are_not_taken_for_inputs() -> None:
    CompileJob(
        ptx_kernel(), backend="ptx", options=["--maxrregcount", "32", "-O", "3", "-e", "scale"]
    )
