"""``asynccomp compile``: compile .cu files and folders of them, many at once."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from ..dumps import result_record
from ..engine import Engine
from ..errors import AsyncCompError
from ..examples import example_names, example_path
from ..job import CompileJob
from ..result import CompileResult


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "compile", help="compile .cu files and folders concurrently"
    )
    p.add_argument("paths", nargs="*", type=Path, help=".cu files or folders of them")
    p.add_argument("--examples", action="store_true", help="compile the built-in examples")
    p.add_argument("--backend", choices=("nvrtc", "nvcc"), default="nvrtc")
    p.add_argument("--output", choices=("cubin", "fatbin", "ptx"), default=None)
    p.add_argument("--arch", default=None, help="e.g. sm_90a (default: the local GPU)")
    p.add_argument("-j", "--jobs", type=int, default=None, help="compiles at once")
    p.add_argument("--timeout", type=float, default=None, help="seconds per job")
    p.add_argument("--out", type=Path, default=None, help="write one binary per input here")
    p.add_argument("--dump", type=Path, default=None, help="dump every job under this folder")
    p.add_argument("--json", type=Path, default=None, help="write one record per job here")
    p.add_argument("--cache-dir", type=Path, default=None, help="disk cache folder")
    p.add_argument("--no-cache", action="store_true", help="compile everything afresh")
    p.add_argument(
        "-X",
        "--option",
        action="append",
        default=[],
        dest="options",
        metavar="FLAG",
        help="extra compiler option (repeatable), e.g. -X=-O3",
    )
    p.set_defaults(run=run)


def _inputs(args: argparse.Namespace) -> list[Path]:
    files: list[Path] = []
    if args.examples:
        files += [example_path(name) for name in example_names()]
    for path in args.paths:
        if path.is_dir():
            files += sorted(path.rglob("*.cu"))
        elif path.is_file():
            files.append(path)
        else:
            raise FileNotFoundError(f"no such file or folder: {path}")
    if not files:
        raise FileNotFoundError("nothing to compile: give .cu files, folders, or --examples")
    return files


def run(args: argparse.Namespace) -> int:
    try:
        files = _inputs(args)
        jobs = [
            CompileJob(
                f.read_text(),
                name=f.stem,
                backend=args.backend,
                output=args.output,
                arch=args.arch,
                options=args.options,
                timeout=args.timeout,
            )
            for f in files
        ]
        engine = Engine(
            arch=args.arch,
            nvrtc_workers=args.jobs,
            nvcc_workers=args.jobs,
            dump_dir=args.dump,
            cache=not args.no_cache,
            cache_dir=args.cache_dir,
        )
    except (OSError, AsyncCompError, UnicodeDecodeError) as exc:
        print(f"asynccomp: error: {exc}", file=sys.stderr)
        return 2
    return anyio.run(_compile, engine, jobs, args)


async def _compile(engine: Engine, jobs: list[CompileJob], args: argparse.Namespace) -> int:
    started = time.monotonic()
    results: list[CompileResult] = []
    async with engine:
        async for result in engine.as_completed(jobs):
            results.append(result)
            _report(result, len(results), len(jobs))
            if args.out is not None and result.binary is not None:
                args.out.mkdir(parents=True, exist_ok=True)
                (args.out / f"{result.job.name}.{result.output}").write_bytes(result.binary)
        versions = engine.toolkit.compiler_versions
    wall = time.monotonic() - started
    if args.json is not None:
        records = [
            result_record(r, folder=r.dump_dir, binary_name=None, versions=versions)
            for r in results
        ]
        args.json.write_text(json.dumps(records, indent=2) + "\n")
    failed = [r for r in results if not r.ok]
    cached = sum(r.cached for r in results)
    print(
        f"\n{len(results) - len(failed)} compiled ({cached} cached), {len(failed)} failed "
        f"in {wall:.2f} s"
    )
    for r in failed:
        print(f"\n--- {r.job.name}: {r.error}", file=sys.stderr)
    return 1 if failed else 0


def _report(result: CompileResult, done: int, total: int) -> None:
    status = "ok" if result.ok else type(result.error).__name__
    if result.cached:
        status = "cached"
    size = f"{len(result.binary)} B" if result.binary is not None else "-"
    regs = ", ".join(f"{k}: {v.registers} regs" for k, v in list(result.resources.items())[:2])
    print(
        f"[{done}/{total}] {result.job.name:<28} {status:<14} {result.elapsed:7.3f} s "
        f"{size:>10}  {regs}",
        flush=True,
    )
