"""S6: what asynccomp writes is private to the user by default (folders 0700, files
0600: cached logs quote sources, dumps hold them whole, reports name every job), with
Debian's default process umask (022); a umask setting shares it on purpose; a cache
folder that others can write is not used (a forged entry there would be served)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from asynccomp import CompileJob, Engine, SettingsError
from asynccomp.cache import CacheTrustWarning

from .kernels import ARCH, needs_nvcc, scale_kernel


@pytest.fixture(autouse=True)
def debian_umask() -> Iterator[None]:
    """The process umask most users have: files 0644, folders 0755 unless asked."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _modes(root: Path) -> dict[str, int]:
    """Every file and folder under ``root`` (itself included): its permission bits."""
    found = {".": stat.S_IMODE(root.stat().st_mode)}
    for path in root.rglob("*"):
        found[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def _open_to_others(root: Path) -> dict[str, str]:
    return {name: f"{mode:04o}" for name, mode in _modes(root).items() if mode & 0o077}


#: A dump's scripts: executable by whoever may read them (modes as a folder's).
SCRIPTS = ("rerun.sh", "rerun.py")
HEADER = "#pragma once\n#define SCALE 2.0f\n"
USES_HEADER = (
    '#include "scale.h"\nextern "C" __global__ void h(float* a) { a[threadIdx.x] *= SCALE; }\n'
)


async def _compile_and_dump(tmp_path: Path, umask: int | None = None, nvcc: bool = False) -> None:
    """Compile and dump an NVRTC job (rerun.py), one that reads a local header (copied
    under the dump's headers/) and, with ``nvcc``, an nvcc job (rerun.sh)."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "scale.h").write_text(HEADER)
    jobs = [
        CompileJob(scale_kernel(), name="k", dump=True),
        CompileJob(USES_HEADER, name="h", options=[f"-I{src}"], dump=True),
    ]
    if nvcc:
        jobs.append(CompileJob(scale_kernel(3.0), name="n", backend="nvcc", dump=True))
    async with Engine(
        arch=ARCH, cache_dir=tmp_path / "cache", dump_dir=tmp_path / "dumps", umask=umask
    ) as engine:
        results = await engine.compile_many(jobs)
    assert all(r.ok for r in results), [r.error for r in results]


@needs_nvcc
async def test_cache_and_dumps_are_private_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ASYNCCOMP_UMASK", raising=False)
    await _compile_and_dump(tmp_path, nvcc=True)
    for root in (tmp_path / "cache", tmp_path / "dumps"):
        assert len(_modes(root)) > 5, root  # entries, shards, stats; sources, logs, rerun.sh
        assert _open_to_others(root) == {}, root
    dumps = _modes(tmp_path / "dumps")
    assert {m for n, m in dumps.items() if (tmp_path / "dumps" / n).is_dir()} == {0o700}
    assert any(n.endswith("rerun.sh") and m == 0o700 for n, m in dumps.items())
    assert any(n.endswith("rerun.py") and m == 0o700 for n, m in dumps.items())
    assert any(n.endswith("/src/scale.h") and m == 0o600 for n, m in dumps.items())  # a copy
    assert any(n.endswith(".ii") or n.endswith(".ptx") for n in dumps)  # nvcc's intermediates


@pytest.mark.parametrize(
    ("how", "umask"),
    [("Engine(umask=...)", 0o022), ("$ASYNCCOMP_UMASK", 0o022), ("Engine(umask=...)", 0o002)],
)
async def test_a_umask_setting_shares_what_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, umask: int
) -> None:
    monkeypatch.delenv("ASYNCCOMP_UMASK", raising=False)
    if how == "$ASYNCCOMP_UMASK":
        monkeypatch.setenv("ASYNCCOMP_UMASK", f"{umask:03o}")
        await _compile_and_dump(tmp_path)
    else:
        await _compile_and_dump(tmp_path, umask=umask)
    for root in (tmp_path / "cache", tmp_path / "dumps"):
        for name, mode in _modes(root).items():
            executable = (root / name).is_dir() or name.endswith(SCRIPTS)
            assert mode == (0o777 if executable else 0o666) & ~umask, (root, name, oct(mode))
        assert any("/headers/" in name for name in _modes(root)) == (root.name == "dumps")


def test_a_bad_umask_is_a_settings_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SettingsError, match="invalid umask 512: must be a umask"):
        Engine(umask=0o1000)
    with pytest.raises(SettingsError, match="invalid umask 'rw'"):
        Engine(umask="rw")  # type: ignore[arg-type]


def test_the_command_lines_reports_outputs_and_dumps_are_private(tmp_path: Path) -> None:
    (tmp_path / "k.cu").write_text(scale_kernel())
    env = {k: v for k, v in os.environ.items() if k != "ASYNCCOMP_UMASK"}
    command = [sys.executable, "-m", "asynccomp", "compile", "--arch", ARCH, "--no-server"]
    command += ["--json", "report.json", "--out", "out", "--dump", "dumps", "k.cu"]
    done = subprocess.run(
        command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE((tmp_path / "report.json").stat().st_mode) == 0o600
    for root in ("out", "dumps"):
        assert _open_to_others(tmp_path / root) == {}, root
    # --umask shares them, and says so to a server it would start ($ASYNCCOMP_UMASK).
    done = subprocess.run(
        [*command[:-1], "--umask", "022", "k.cu"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE((tmp_path / "report.json").stat().st_mode) == 0o644


@pytest.mark.parametrize("how", ["world-writable", "group-writable", "another user's"])
async def test_a_cache_folder_others_can_write_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Whoever can write in the cache folder can forge entries: it is not used, with a
    CacheTrustWarning saying why; a umask that shares the cache with them takes it."""
    monkeypatch.delenv("ASYNCCOMP_UMASK", raising=False)
    cache = tmp_path / "cache"
    job = CompileJob(scale_kernel(), name="k")
    async with Engine(arch=ARCH, cache_dir=cache) as engine:
        assert (await engine.compile(job)).ok  # an entry, in a folder of the user's
    if how == "world-writable":
        cache.chmod(0o777)
    elif how == "group-writable":
        cache.chmod(0o770)
    else:
        if os.getuid() != 0:
            pytest.skip("needs root to give a folder to another user")
        os.chown(cache, 65534, 65534)
    said = {"world-writable": "every user", "group-writable": "its group"}.get(how, "uid 65534")
    with pytest.warns(CacheTrustWarning, match=said):
        async with Engine(arch=ARCH, cache_dir=cache) as engine:
            result = await engine.compile(job)
    assert result.ok and not result.cached  # nothing read from there
    # Shared on purpose: the umask lets those users write, and the folder is used.
    async with Engine(arch=ARCH, cache_dir=cache, umask=0o000) as engine:
        assert (await engine.compile(job)).cached
