"""``asynccomp doctor``: what this machine offers asynccomp, what is missing, and how to
get it. Exits 1 when something asked for (``--backend``, ``--arch``) is missing, or
when the remote cache the environment names cannot be used (it is probed: reached,
logged in, a ping and a read)."""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from .._version import __version__
from ..backends import BACKENDS, arch_supported, backend_class, backend_names, compiler_versions
from ..cache import (
    REMOTE_CACHE_ENV,
    DiskCache,
    RedisCache,
    RemoteAuth,
    RemoteCache,
    default_cache_dir,
    remote_cache_from_url,
)
from ..cache._remote import redacted_url
from ..errors import AsyncCompError
from ..gpu import local_gpu_arch
from ..job import DEFAULT_BACKEND, parse_arch
from ..toolkit import HEADERS_ENV, find_toolkit, wheel_include_dirs

#: The wheels that together give a working nvcc without a CUDA toolkit.
NVCC_WHEELS = "nvidia-cuda-nvcc nvidia-cuda-crt nvidia-nvvm nvidia-cuda-runtime nvidia-cuda-cccl"
#: The wheels of the headers NVRTC compiles against without a CUDA toolkit.
HEADER_WHEELS = "nvidia-cuda-runtime nvidia-cuda-cccl"


def add_parser(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "doctor",
        help="what asynccomp finds here (toolkit, NVRTC, nvcc, GPU, cache, server)",
        description="Print what asynccomp finds on this machine and what is missing. "
        "Exit status 1 when something asked for is missing, or when the remote cache "
        "($ASYNCCOMP_REMOTE_CACHE, probed: login, ping, a read) cannot be used.",
    )
    parser.add_argument(
        "--backend",
        action="append",
        choices=backend_names(),
        default=None,
        help=f"a backend you need (repeatable; default: {DEFAULT_BACKEND})",
    )
    parser.add_argument("--arch", default=None, help="an architecture you need, e.g. sm_90a")
    parser.add_argument("--json", action="store_true", help="the report as JSON")
    parser.set_defaults(run=run)


def _header_version(folders: Sequence[Path]) -> str | None:
    """The CUDA version of the headers in ``folders`` (their ``cuda.h``)."""
    for folder in folders:
        try:
            text = (Path(folder) / "cuda.h").read_text(errors="replace")
        except OSError:
            continue
        match = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", text)
        if match:
            number = int(match.group(1))
            return f"{number // 1000}.{number % 1000 // 10}"
    return None


def _server() -> dict[str, Any]:
    from ..server import server_paths, status

    try:
        paths = server_paths()
    except AsyncCompError as exc:
        return {"running": False, "problem": str(exc)}
    try:
        found = status(paths.socket)
    except AsyncCompError:
        return {"running": False, "socket": str(paths.socket)}
    # The server's own settings: its jobs use them, not this process's.
    return {
        "running": True,
        "socket": str(paths.socket),
        "pid": found.get("pid"),
        "workers": found.get("workers"),
        "settings": found.get("settings"),
        "toolkit": found.get("toolkit"),
    }


async def _probe(store: RemoteCache) -> str | None:
    """Connect, log in, ping and read: why the remote tier cannot be used, or None."""
    try:
        return await store.probe() if isinstance(store, RedisCache) else None
    finally:
        await store.aclose()


def _remote_key() -> dict[str, Any] | None:
    """Where the remote tier's key comes from and its id; never the key."""
    try:
        auth = RemoteAuth.from_environment()
    except AsyncCompError as exc:
        return {"problem": str(exc)}
    return None if auth is None else {"id": auth.key_id, "source": auth.source}


def _header_note(
    nvrtc: str,
    headers: str,
    include_dirs: Sequence[Path],
    cuda_root: Path | None,
    wheels: Sequence[Path],
    wheel_headers: str | None,
) -> str:
    """What to say when NVRTC's version and its headers' differ: where the headers come
    from, and how to get matching ones (the header wheels are used only when no toolkit
    root with headers was found, or when $ASYNCCOMP_CUDA_HEADERS=wheels says so)."""
    release = ".".join(nvrtc.split(".")[:2])
    said = (
        f"NVRTC {nvrtc} compiles against CUDA {headers} headers "
        f"({include_dirs[0] if include_dirs else '?'}): a newer NVRTC usually takes older "
        "headers, but kernels that need newer ones fail"
    )
    if wheels and list(include_dirs) == wheels:
        return (
            f"{said}; these are the header wheels': pip install -U {HEADER_WHEELS} for "
            f"CUDA {release} headers"
        )
    if wheels:
        matching = wheel_headers is not None and wheel_headers.split(".")[:2] == release.split(".")
        return (
            f"{said}. The header wheels are installed (CUDA {wheel_headers or '?'} headers in "
            f"{wheels[0]}{', matching NVRTC' if matching else ''}), but asynccomp uses them "
            f"only when it finds no toolkit root with headers, and it found {cuda_root}: "
            f"set {HEADERS_ENV}=wheels to compile against them, or CUDA_PATH to a CUDA "
            f"{release} toolkit"
        )
    return (
        f"{said}; set CUDA_PATH to a CUDA {release} toolkit, or pip install {HEADER_WHEELS} "
        f"and set {HEADERS_ENV}=wheels"
    )


def report(args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    """The facts, and the problems with what was asked for."""
    toolkit = find_toolkit()
    versions = compiler_versions(toolkit)
    headers = _header_version(toolkit.include_dirs)
    wheels = wheel_include_dirs()
    wheel_headers = _header_version(wheels)
    wheels_used = bool(wheels) and list(toolkit.include_dirs) == wheels
    problems: list[str] = []
    notes: list[str] = []
    wanted = args.backend or [DEFAULT_BACKEND]
    if toolkit.nvrtc_version is None:
        notes.append(
            f"NVRTC could not be loaded ({toolkit.nvrtc_error}): pip install nvidia-cuda-nvrtc"
        )
    if toolkit.nvcc is None:
        notes.append(f"nvcc was not found: install a CUDA toolkit, or pip install {NVCC_WHEELS}")
    problems += [f"{b}: its compiler is missing" for b in wanted if versions[b] is None]
    nvrtc = versions["nvrtc"]
    if nvrtc and headers and nvrtc.split(".")[:2] != headers.split(".")[:2]:
        notes.append(
            _header_note(
                nvrtc, headers, toolkit.include_dirs, toolkit.cuda_root, wheels, wheel_headers
            )
        )
    elif os.environ.get(HEADERS_ENV, "").strip().lower() == "wheels" and not wheels_used:
        notes.append(
            f"{HEADERS_ENV}=wheels, but the header wheels are not installed: "
            f"pip install {HEADER_WHEELS}"
        )
    if args.arch:
        try:
            parse_arch(args.arch)
        except AsyncCompError as exc:
            problems.append(str(exc))
        else:
            for backend in wanted:
                known = backend_class(backend).archs(toolkit)
                if not arch_supported(known, args.arch):
                    listed = ", ".join(f"sm_{n}" for n in sorted(known))
                    problems.append(
                        f"{backend} does not support {args.arch} (it supports {listed})"
                    )
    remote_url = os.environ.get(REMOTE_CACHE_ENV, "").strip()
    remote_key = _remote_key()
    remote_problem = None
    if remote_url:
        try:
            store = remote_cache_from_url(remote_url)
        except AsyncCompError as exc:
            remote_problem = str(exc)
        else:
            remote_problem = anyio.run(_probe, store)
        if remote_problem is not None:
            # Set and unusable: every compile would go without it, or fail to start.
            problems.append(f"the remote cache is not used: {remote_problem}")
    cache = default_cache_dir()
    try:
        entries, size = DiskCache(cache).count()
        cache_state: dict[str, Any] = {"folder": str(cache), "entries": entries, "bytes": size}
    except AsyncCompError as exc:
        cache_state = {"folder": str(cache), "problem": str(exc)}
    facts = {
        "asynccomp": __version__,
        "python": platform.python_version(),
        "nvrtc": {
            "version": nvrtc,
            "library": toolkit.nvrtc_library,
            "headers": headers,
            "include_dirs": [str(d) for d in toolkit.include_dirs],
            "header_wheels": {
                "include_dirs": [str(d) for d in wheels],
                "headers": wheel_headers,
                "used": wheels_used,
            },
            "archs": list(toolkit.nvrtc_archs),
        },
        "nvcc": {
            "path": str(toolkit.nvcc) if toolkit.nvcc else None,
            "version": toolkit.nvcc_version,
            "archs": list(toolkit.nvcc_archs),
            "searched": list(toolkit.searched),
        },
        "backends": versions,  # every registered backend's compiler version
        "cuda_root": str(toolkit.cuda_root) if toolkit.cuda_root else None,
        "gpu": local_gpu_arch(),
        "cache": cache_state,
        "remote_cache": redacted_url(remote_url) if remote_url else None,
        "remote_cache_problem": remote_problem,
        "remote_cache_key": remote_key,
        "server": _server(),
        "notes": notes,
        "problems": problems,
    }
    return facts, problems


def run(args: argparse.Namespace) -> int:
    try:
        facts, problems = report(args)
    except AsyncCompError as exc:  # a bad setting the toolkit search reads
        print(f"asynccomp: error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(facts, indent=2))
        return 1 if problems else 0
    nvrtc, nvcc = facts["nvrtc"], facts["nvcc"]
    server = facts["server"]
    lines = [
        f"asynccomp      {facts['asynccomp']} (Python {facts['python']})",
        f"NVRTC          {nvrtc['version'] or 'NOT FOUND'}  {nvrtc['library'] or ''}".rstrip(),
        f"  headers      CUDA {nvrtc['headers'] or '?'} in "
        + (", ".join(nvrtc["include_dirs"]) or "-"),
        f"  archs        {', '.join(f'sm_{a}' for a in nvrtc['archs']) or '-'}",
        f"nvcc           {nvcc['path'] or 'NOT FOUND'}  {nvcc['version'] or ''}".rstrip(),
        f"  archs        {', '.join(f'sm_{a}' for a in nvcc['archs']) or '-'}",
        "backends       "
        + ", ".join(f"{b} {v or 'NOT FOUND'}" for b, v in facts["backends"].items()),
        f"CUDA root      {facts['cuda_root'] or '-'}",
        f"local GPU      {facts['gpu'] or 'none found (give --arch / arch=)'}",
        f"cache          {facts['cache']['folder']}"
        + (
            f" ({facts['cache']['entries']} entries, {facts['cache']['bytes'] / 2**20:.1f} MiB)"
            if "entries" in facts["cache"]
            else f" ({facts['cache'].get('problem')})"
        ),
        f"remote cache   {facts['remote_cache'] or f'none ({REMOTE_CACHE_ENV} unset)'}"
        + (
            ""
            if not facts["remote_cache"]
            else " (NOT USABLE, see below)"
            if facts["remote_cache_problem"]
            else " (reachable, login and a read work)"
        ),
        "  key          "
        + (
            f"id {key['id']}, from {key['source']}"
            if (key := facts["remote_cache_key"]) and "id" in key
            else ("refused (see the notes)" if key else "none")
        ),
        "server         "
        + (
            f"running, pid {server.get('pid')} ({server.get('socket')})"
            if server.get("running")
            else "not running (asynccomp serve starts one; clients start it when needed)"
        ),
    ]
    settings = server.get("settings") or {}
    if server.get("running") and settings:
        slots = settings.get("slots") or {}
        modes = settings.get("modes") or {}
        # The backends that keep worker processes (NVRTC), and how they run.
        in_processes = "".join(
            f", {name} in {mode}"
            for name, mode in modes.items()
            if name in BACKENDS and backend_class(name).warms_up
        )
        lines += [
            f"  compiles     {', '.join(f'{n} x{k}' for k, n in slots.items()) or '-'}"
            f" ({settings.get('executor')}{in_processes}), "
            f"{server.get('workers')} workers alive",
            "  its cache    "
            + (settings.get("cache_dir") or "memory only" if settings.get("cache") else "off"),
            f"  its remote   {settings.get('remote_cache') or 'none'}",
        ]
    if nvcc["path"] is None:
        lines.append("searched for nvcc:")
        lines += [f"  {s}" for s in nvcc["searched"]]
    lines += [f"note: {n}" for n in facts["notes"]]
    lines += [f"PROBLEM: {p}" for p in problems]
    print("\n".join(lines))
    return 1 if problems else 0
