"""``$ASYNCCOMP_BASE_DIR`` (ccache's ``base_dir``): the same sources and headers compiled
from a copy of a tree, or from another working folder, are a cache hit, with real NVRTC
on real folders, in process, on a compile server and from the command line; and never
when the headers differ there, or when the binary can name a path."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from asynccomp import CompileJob, CompileResult, Engine, InvalidJob
from asynccomp.backends import PreparedCompile
from asynccomp.cache._deps import Dependency
from asynccomp.cache._relocate import relocated_dependencies, rooted_dependencies

from .kernels import ARCH, needs_nvcc
from .servers import running_server, server_folder
from .test_cli import asynccomp

SOURCE = (
    '#include "local.h"\n'
    '#include "sub.h"\n'
    'extern "C" __global__ void k(int* x) { x[threadIdx.x] = LOCAL * 100 + SUB; }\n'
)


def _tree(root: Path, local: int = 1, sub: int = 2, extra: str = "") -> Path:
    """A project: ``k.cu`` (SOURCE), ``local.h`` next to it, ``inc/sub.h``."""
    (root / "inc").mkdir(parents=True)
    (root / "k.cu").write_text(SOURCE)
    (root / "local.h").write_text(f"#define LOCAL {local}\n{extra}")
    (root / "inc" / "sub.h").write_text(f"#define SUB {sub}\n")
    return root


@pytest.fixture
def trees(tmp_path: Path) -> Iterator[tuple[Path, Path, Path]]:
    """The base folder and two copies of one tree under it."""
    base = tmp_path / "base"
    first = _tree(base / "alice" / "proj")
    second = base / "bob" / "work" / "proj"
    shutil.copytree(first, second.parent / "proj")
    yield base, first, second


async def _compile_in(
    folder: Path, monkeypatch: pytest.MonkeyPatch, backend: str = "nvrtc", **engine: Any
) -> CompileResult:
    """``SOURCE`` with ``-Iinc`` compiled from ``folder`` (a quoted include: the working
    folder joins the include chain), on an engine of its own sharing the cache."""
    monkeypatch.chdir(folder)
    async with Engine(arch=ARCH, **engine) as e:
        job = CompileJob(SOURCE, name="k", options=["-Iinc"], backend=backend)
        result = await e.compile(job)
    assert result.ok, result.log
    return result


async def test_a_copy_of_the_tree_hits_with_a_base_dir_and_only_then(
    trees: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base, first, second = trees
    cache = tmp_path / "cache"
    monkeypatch.delenv("ASYNCCOMP_BASE_DIR", raising=False)
    assert not (await _compile_in(first, monkeypatch, cache_dir=cache)).cached
    # Without a base folder the paths differ, and so do the keys.
    assert not (await _compile_in(second, monkeypatch, cache_dir=cache)).cached

    monkeypatch.setenv("ASYNCCOMP_BASE_DIR", str(base))
    made = await _compile_in(first, monkeypatch, cache_dir=cache)
    assert not made.cached
    hit = await _compile_in(second, monkeypatch, cache_dir=cache)
    assert hit.cached
    # The binary names no path: the hit is what compiling there gives.
    fresh = await _compile_in(second, monkeypatch, cache=False)
    assert hit.binary == fresh.binary == made.binary

    # A header that differs in the copy is a miss, and the copy's own binary.
    (second / "inc" / "sub.h").write_text("#define SUB 7\n")
    changed = await _compile_in(second, monkeypatch, cache_dir=cache)
    assert not changed.cached
    assert changed.binary == (await _compile_in(second, monkeypatch, cache=False)).binary
    assert changed.binary != made.binary
    # ... and the first tree, unchanged, still gets its own.
    back = await _compile_in(first, monkeypatch, cache_dir=cache)
    assert back.binary == made.binary


@pytest.mark.parametrize("backend", ["nvrtc", pytest.param("nvcc", marks=needs_nvcc)])
async def test_a_header_found_in_another_place_of_the_copy_is_a_miss(
    trees: tuple[Path, Path, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    backend: str,
) -> None:
    """``local.h`` appearing in the copy's ``inc/``, which is searched before the
    working folder where the first tree's was found: the same key, another header read,
    a miss. (nvcc names only the headers it read, not the places it looked in first:
    its entries stay with their working folder.)"""
    base, first, second = trees
    cache = tmp_path / "cache"
    monkeypatch.setenv("ASYNCCOMP_BASE_DIR", str(base))
    made = await _compile_in(first, monkeypatch, backend, cache_dir=cache)
    (second / "inc" / "local.h").write_text("#define LOCAL 9\n")
    other = await _compile_in(second, monkeypatch, backend, cache_dir=cache)
    assert not other.cached and other.binary != made.binary
    fresh = await _compile_in(second, monkeypatch, backend, cache=False)
    assert other.binary == fresh.binary


async def test_no_hit_from_elsewhere_when_the_binary_can_name_a_path(
    trees: tuple[Path, Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Line info (``-lineinfo``) and a header that spells ``__FILE__`` (or ``assert``,
    which does) keep the entry where it was made."""
    base, first, second = trees
    monkeypatch.setenv("ASYNCCOMP_BASE_DIR", str(base))
    cache = tmp_path / "cache"
    for folder in (first, second):
        monkeypatch.chdir(folder)
        async with Engine(arch=ARCH, cache_dir=cache) as engine:
            job = CompileJob(SOURCE, name="k", options=["-Iinc", "-lineinfo"])
            result = await engine.compile(job)
        assert result.ok and not result.cached

    naming = tmp_path / "naming"
    # The header puts its own path into the binary (a device string): a copy's binary
    # differs, so an entry made in one tree must not answer the other.
    one = _tree(base / "carol" / "proj", extra="__device__ const char* here = __FILE__;\n")
    two = base / "dave" / "proj"
    shutil.copytree(one, two)
    made = await _compile_in(one, monkeypatch, cache_dir=naming)
    assert not made.cached and made.binary is not None and str(one).encode() in made.binary
    there = await _compile_in(two, monkeypatch, cache_dir=naming)
    assert not there.cached and there.binary is not None and str(two).encode() in there.binary
    # From where it was made (the last compile replaced the first's entry), a hit.
    again = await _compile_in(two, monkeypatch, cache_dir=naming)
    assert again.cached and again.binary == there.binary


async def test_a_relative_base_dir_is_an_invalid_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASYNCCOMP_BASE_DIR", "relative/folder")
    monkeypatch.chdir(tmp_path)
    async with Engine(arch=ARCH, cache_dir=tmp_path / "cache") as engine:
        with pytest.raises(InvalidJob, match="ASYNCCOMP_BASE_DIR"):
            await engine.compile(CompileJob(SOURCE, name="k"))


@pytest.mark.parametrize("where", ["in process", "on a compile server"])
def test_the_command_line_hits_from_a_copy_of_the_tree(
    trees: tuple[Path, Path, Path], tmp_path: Path, where: str
) -> None:
    base, first, second = trees
    cache = tmp_path / "cache"
    env = {"ASYNCCOMP_BASE_DIR": str(base)}
    with server_folder() as folder:
        env["ASYNCCOMP_SERVER_DIR"] = str(folder)
        flags = ["--no-server"] if where == "in process" else ["--server"]
        runs = []
        server = (
            contextlib.nullcontext()
            if where == "in process"
            else running_server(folder, "--cache-dir", str(cache))
        )
        with server:
            for tree in (first, second):
                done = asynccomp(
                    "compile",
                    "k.cu",
                    "--arch",
                    ARCH,
                    *flags,
                    "--",
                    "-Iinc",
                    cache=cache,
                    env=env,
                    cwd=tree,
                )
                assert done.returncode == 0, done.stderr
                runs.append(done.stdout)
    assert "0 from the cache" in runs[0]
    assert "1 job: 1 succeeded (0 compiled, 1 from the cache)" in runs[1]


async def test_a_header_appearing_where_nvrtc_looks_first_is_a_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NVRTC worker processes look for a quoted include in their own (empty) folder,
    then along ``-I``: ``inc/local.h`` appearing after the working folder's was cached
    is what the next compile reads, so the entry is stale (the scan used to look in the
    engine's working folder first, as NVRTC in threads does, and missed it)."""
    monkeypatch.delenv("ASYNCCOMP_BASE_DIR", raising=False)
    tree = _tree(tmp_path / "proj")
    cache = tmp_path / "cache"
    made = await _compile_in(tree, monkeypatch, cache_dir=cache, nvrtc_mode="processes")
    (tree / "inc" / "local.h").write_text("#define LOCAL 9\n")
    after = await _compile_in(tree, monkeypatch, cache_dir=cache, nvrtc_mode="processes")
    fresh = await _compile_in(tree, monkeypatch, cache=False, nvrtc_mode="processes")
    assert not after.cached and after.binary == fresh.binary != made.binary


def _recorded(path: Path) -> Dependency:
    info = path.stat()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return Dependency(str(path), info.st_size, info.st_mtime_ns, digest, info.st_ctime_ns,
                      info.st_ino)  # fmt: skip


def test_relocated_dependencies_keep_their_ctime_and_inode(tmp_path: Path) -> None:
    """A hit in the tree that made the entry is one stat per header, not a read: the
    relocated records keep what tells an untouched file (ctime and inode)."""
    tree = tmp_path / "tree"
    (tree / "inc").mkdir(parents=True)
    header = tree / "inc" / "config.h"
    header.write_text("#define TILE 4\n")
    made = cast(PreparedCompile, SimpleNamespace(base_dir=str(tmp_path), cwd=str(tree)))
    [original] = deps = [_recorded(header)]
    moved, metadata = relocated_dependencies(deps, made)
    assert metadata == {"relocated": True} and moved[0].path == "inc/config.h"
    [rooted] = rooted_dependencies(moved, metadata, str(tree)) or []
    assert rooted == original  # the path back where it was, ctime and inode kept


def test_a_header_outside_the_base_that_spells_a_path_binds_the_entry(tmp_path: Path) -> None:
    """A macro defined outside the base folder that expands __FILE__ (as assert does),
    used in a header under it, writes that header's path into the binary: the entry
    is bound to its working folder, never served to a copy of the tree."""
    outside = tmp_path / "outside" / "where.h"
    outside.parent.mkdir()
    outside.write_text("#define WHERE __FILE__\n")
    tree = tmp_path / "base" / "tree"
    tree.mkdir(parents=True)
    inside = tree / "uses.h"
    inside.write_text('#include "where.h"\nconst char* here = WHERE;\n')
    made = cast(PreparedCompile, SimpleNamespace(base_dir=str(tmp_path / "base"), cwd=str(tree)))
    deps = [_recorded(outside), _recorded(inside)]
    _, metadata = relocated_dependencies(deps, made)
    assert metadata == {"anchor": str(tree)}


_SPELLINGS = {
    "__builtin_FILE": "__device__ const char* here = __builtin_FILE();\n",
    "token paste": "#define CAT(a, b) a##b\n__device__ const char* here = CAT(__FI, LE__);\n",
    "backslash-newline": "__device__ const char* here = __FI\\\nLE__;\n",
    "source_location": (
        "#include <cuda/std/source_location>\n"
        "__device__ const char* here = cuda::std::source_location::current().file_name();\n"
    ),
}


@pytest.mark.parametrize("extra", list(_SPELLINGS.values()), ids=list(_SPELLINGS))
async def test_a_header_that_writes_its_path_in_any_spelling_is_not_relocated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: str
) -> None:
    """R20: ``__builtin_FILE()`` (what ``source_location::current()`` calls), a
    token-pasted or line-joined ``__FILE__``: the binary names the header's path, so a
    copy of the tree gets its own binary, never the other tree's path from the cache."""
    base = tmp_path / "base"
    monkeypatch.setenv("ASYNCCOMP_BASE_DIR", str(base))
    one = _tree(base / "carol" / "proj", extra=extra)
    two = base / "dave" / "proj"
    shutil.copytree(one, two)
    cache = tmp_path / "cache"
    made = await _compile_in(one, monkeypatch, cache_dir=cache)
    assert made.binary is not None and str(one).encode() in made.binary
    there = await _compile_in(two, monkeypatch, cache_dir=cache)
    assert there.binary is not None
    assert str(one).encode() not in there.binary, "the copy's hit carries the other tree's path"
    assert not there.cached and str(two).encode() in there.binary


@pytest.mark.parametrize("spelling", ["__builtin_FILE()", "CAT(__FI, LE__)"])
async def test_a_source_that_writes_its_name_is_keyed_by_it(spelling: str, tmp_path: Path) -> None:
    """Two jobs of one source under two names: when the source can write its own file
    name into the binary, each gets its own binary."""
    source = (
        "#define CAT(a, b) a##b\n"
        f"__device__ const char* here = {spelling};\n"
        'extern "C" __global__ void k(const char** x) { x[0] = here; }\n'
    )
    async with Engine(arch=ARCH, cache_dir=tmp_path / "cache") as engine:
        first = await engine.compile(CompileJob(source, name="first"))
        second = await engine.compile(CompileJob(source, name="second"))
    assert first.ok and second.ok, (first.log, second.log)
    assert second.binary is not None and b"second.cu" in second.binary
    assert not second.cached and b"first.cu" not in second.binary
