"""A tuning process's first autotune, process after process: what the warm templates
shared by a user's processes (and the compile server) save a process that is not the
machine's first.

    python -m benchmarks.tuners.first_autotune --processes 3 --out DIR -- \\
        --configs 16 --size 512 --no-gpu --passes 2 --entry from_kernel \\
        --modes asynccomp-nvrtc-grouped [--server]

It stops the user's compile server and shared templates (``asynccomp serve --stop``), so
the first process starts from nothing, then runs ``benchmarks.tuners.tilelang_sweep``
with the arguments after ``--`` in ``--processes`` fresh processes, one after the other
(``--baseline MODE``: one process of that mode first, e.g. ``tilelang-grouped``). Each
process's JSON is ``DIR/process_N.json``; the summary is a line per process: its first
and later autotunes (wall seconds), the load, and whether its lowering workers forked
from a template an earlier process left. ``--shared off`` runs every process with
``ASYNCCOMP_SHARED_TEMPLATES=off``: the same sequence without sharing, to compare.
It stops what it started at the end. ``--register-early`` among the sweep's arguments:
each process registers as it starts, before its ``import tilelang`` (the baseline does
not: it is TileLang's own).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def _stop() -> None:
    subprocess.run(
        [sys.executable, "-m", "asynccomp", "serve", "--stop"],
        capture_output=True,
        check=False,
        timeout=120,
    )


def _sweep(sweep_args: list[str], out: Path, environ: dict[str, str]) -> dict[str, Any]:
    subprocess.run(
        [sys.executable, "-m", "benchmarks.tuners.tilelang_sweep", *sweep_args, "--json", str(out)],
        check=True,
        env={**os.environ, **environ},
        timeout=3600,
    )
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--baseline", default=None, help="one process of this mode first")
    parser.add_argument("--shared", choices=("on", "off"), default="on")
    parser.add_argument("sweep", nargs=argparse.REMAINDER, help="-- then tilelang_sweep's")
    args = parser.parse_args()
    sweep_args = [a for a in args.sweep if a != "--"]
    args.out.mkdir(parents=True, exist_ok=True)
    environ = {"ASYNCCOMP_SHARED_TEMPLATES": args.shared}
    _stop()
    rows = []
    try:
        if args.baseline:
            base = [a for a in sweep_args if a != "--register-early"]  # asynccomp's alone
            if "--modes" in base:
                base[base.index("--modes") + 1] = args.baseline
            else:
                base += ["--modes", args.baseline]
            report = _sweep(base, args.out / "baseline.json", environ)
            for mode in report["modes"]:
                print(f"baseline {mode['mode']}: {mode['wall_s_per_pass']} s", flush=True)
        for number in range(1, args.processes + 1):
            report = _sweep(sweep_args, args.out / f"process_{number}.json", environ)
            for mode in report["modes"]:
                row = {
                    "process": number,
                    "mode": mode["mode"],
                    "walls": mode["wall_s_per_pass"],
                    "load": mode["uptime"][0],
                    "best": mode["best_config"],
                    "lowering": mode.get("lowering"),
                    "registered_before_s": mode.get("registered_before_s"),
                    "pch": mode.get("pch"),
                    "pch_ahead": mode.get("pch_ahead"),
                }
                rows.append(row)
                said = [
                    f"process {number} {mode['mode']}: autotunes {mode['wall_s_per_pass']} s",
                    f"load {row['load']:.2f}",
                    f"lowering pool {row['lowering']}",
                ]
                if row["registered_before_s"] is not None:
                    said.append(f"registered {row['registered_before_s']} s before")
                if row["pch"] is not None:
                    said.append(f"PCHs {row['pch']}")
                if row["pch_ahead"] is not None:  # made at register(): whether, and when
                    said.append(f"PCH made at register() {row['pch_ahead']}")
                print(", ".join(said), flush=True)
    finally:
        _stop()
    (args.out / "summary.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
