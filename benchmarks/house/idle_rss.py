"""Memory of an idle process that registered asynccomp with a tuner (issue 36: "memory when
idle, before and after").

A fresh Python process imports the tuner's asynccomp client and calls its
``register()`` (``asynccomp.tvm`` or ``asynccomp.tilelang``), optionally compiles one
small kernel through it (the engine and its workers started, as after a tuner's first
batch), then does nothing. After ``--settle`` seconds of that, this script reads the
memory of the process and of every process under it (templates, workers) from
``/proc``: RSS, and PSS (a forked worker shares its template's pages; PSS splits shared
pages between the processes that map them, so the tree's PSS is what it really holds).
A compile server the process started (``asynccomp serve``, detached: it stays warm for the
next tuning process of the machine) is reported beside it, then stopped.

    python -m benchmarks.house.idle_rss --tuner tvm                 # register() only
    python -m benchmarks.house.idle_rss --tuner tvm --compile       # and one compile
    python -m benchmarks.house.idle_rss --tuner tilelang --json out.json
    python -m benchmarks.house.idle_rss --tuner tilelang --nvrtc-arch sm_90a  # NVRTC, PCH

Before and after a change: run it with ``PYTHONPATH`` pointing at each checkout's
folder (the child inherits it), and with the Python of a virtual environment that has
the tuner installed (``--python``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

_CHILD = """
import sys, time
tuner, compile_one, nvrtc_arch = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
if tuner == "tvm":
    import asynccomp.tvm as client
else:
    import asynccomp.tilelang as client
if nvrtc_arch:  # TileLang on NVRTC: its PCH made at register(), waited for
    client.register(backend="nvrtc", target={"kind": "cuda", "arch": nvrtc_arch})
    from asynccomp.tilelang import _facade
    if _facade._state.ahead is not None:
        _facade._state.ahead.join()
else:
    client.register()
if compile_one:
    import asynccomp.tvm
    src = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }'
    asynccomp.tvm.compile_cuda(src, target_format="cubin", arch="sm_90a")
print("ready", flush=True)
time.sleep(3600)
"""


def _memory(pid: int) -> dict[str, Any]:
    """RSS and PSS (MiB) of ``pid`` and of the processes under it."""
    root = psutil.Process(pid)
    rows = []
    for process in [root, *root.children(recursive=True)]:
        try:
            full = process.memory_full_info()
            rows.append((process.name(), full.rss, full.pss))
        except psutil.NoSuchProcess:
            continue
    mib = 1024 * 1024
    return {
        "process_rss_mib": round(rows[0][1] / mib, 1),
        "tree_rss_mib": round(sum(r[1] for r in rows) / mib, 1),
        "tree_pss_mib": round(sum(r[2] for r in rows) / mib, 1),
        "processes": [
            {"name": n, "rss_mib": round(r / mib, 1), "pss_mib": round(p / mib, 1)}
            for n, r, p in rows
        ],
    }


def _servers_since(started: float) -> list[psutil.Process]:
    """Compile servers (``asynccomp serve``) started since ``started`` (time.time())."""
    found = []
    for process in psutil.process_iter(["cmdline", "create_time"]):
        cmdline = " ".join(process.info["cmdline"] or ())
        if "acsoak" in cmdline:  # a soak's own servers (benchmarks/server/soak.py)
            continue
        if "asynccomp serve" in cmdline and process.info["create_time"] >= started - 1:
            found.append(process)
    return found


def measure(
    python: str, tuner: str, compile_one: bool, settle: float, nvrtc_arch: str = ""
) -> dict[str, Any]:
    wall = time.time()
    child = subprocess.Popen(
        [python, "-c", _CHILD, tuner, "1" if compile_one else "0", nvrtc_arch],
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
        # Not this folder: ``python -c`` puts its working folder first on sys.path, ahead
        # of $PYTHONPATH, and a checkout here would win over the one asked for.
        cwd=tempfile.gettempdir(),
    )
    try:
        assert child.stdout is not None
        started = time.monotonic()
        line = child.stdout.readline()
        if line.strip() != "ready":
            raise SystemExit(f"idle_rss: the child did not get ready (exit {child.wait()})")
        ready = time.monotonic() - started
        time.sleep(settle)
        result = {"tuner": tuner, "compile": compile_one, "ready_s": round(ready, 2)}
        result |= {"settle_s": settle} | _memory(child.pid)
        # A compile may have started this user's compile server (detached, warm for the
        # next tuning process): its memory is the machine's, reported beside.
        result["servers"] = [_memory(p.pid) for p in _servers_since(wall)]
        return result
    finally:
        child.kill()
        child.wait()
        for server in _servers_since(wall):  # started for this measurement: stopped
            server.terminate()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tuner", choices=("tvm", "tilelang"), default="tvm")
    parser.add_argument("--compile", action="store_true", help="compile one kernel first")
    parser.add_argument("--settle", type=float, default=10.0, help="idle seconds first")
    parser.add_argument("--python", default=sys.executable, help="the child's Python")
    parser.add_argument(
        "--nvrtc-arch",
        default="",
        help="TileLang: register(backend='nvrtc') for this architecture (e.g. sm_90a), its "
        "PCH made at register() waited for ($ASYNCCOMP_PCH_AHEAD=off: none)",
    )
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args(argv)
    if args.nvrtc_arch and args.tuner != "tilelang":
        parser.error("--nvrtc-arch is TileLang's (--tuner tilelang)")
    result = measure(args.python, args.tuner, args.compile, args.settle, args.nvrtc_arch)
    result["pythonpath"] = os.environ.get("PYTHONPATH", "")
    print(
        f"{args.tuner}{' + one compile' if args.compile else ''}: ready in {result['ready_s']} s;"
        f" after {args.settle:g} s idle: the process {result['process_rss_mib']} MiB RSS,"
        f" with its {len(result['processes']) - 1} children {result['tree_rss_mib']} MiB RSS,"
        f" {result['tree_pss_mib']} MiB PSS"
    )
    for row in result["processes"]:
        print(f"  {row['name']:<16} RSS {row['rss_mib']:>7} MiB  PSS {row['pss_mib']:>7} MiB")
    for server in result["servers"]:
        print(
            f"the compile server it started: {server['process_rss_mib']} MiB RSS, with its"
            f" {len(server['processes']) - 1} children {server['tree_rss_mib']} MiB RSS,"
            f" {server['tree_pss_mib']} MiB PSS"
        )
        for row in server["processes"]:
            print(f"  {row['name']:<16} RSS {row['rss_mib']:>7} MiB  PSS {row['pss_mib']:>7} MiB")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
