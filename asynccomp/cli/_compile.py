"""``asynccomp compile``: compile .cu files and folders of them, many at once."""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

from ..backends._base import safe_stem
from ..bench import text_table
from ..dumps import result_record
from ..engine import Engine
from ..errors import AsyncCompError, CompileTimeout, DumpDirError, ServerError
from ..examples import example_names, example_path
from ..gpu import local_gpu_arch
from ..job import CompileJob
from ..result import CompileResult
from ..server import server_paths
from ._args import arch, positive_float, positive_int
from ._progress import Display, JobLines, ProgressBar, job_status

DESCRIPTION = """\
Compile .cu files, and every .cu file under the given folders, concurrently.

Extra compiler options go after -X (-X=--use_fast_math, -X=-DTILE=64) or after a lone
--, which passes everything behind it to the compiler as is:
  asynccomp compile kernels/ --arch sm_90a -- -DTILE=64 -Iinclude --use_fast_math
Relative -I folders are made absolute (nvcc runs in a folder of its own).

When this user's compile server runs (`asynccomp serve`), the jobs go there: its
workers are warm and its cache is shared with every other process. --server starts
it if needed; --no-server, -j, --cache-dir and --no-cache compile in this process.

On a terminal a progress bar shows done/failed/cached counts, the rate and an ETA;
otherwise each finished job prints one line. A summary follows. Exit status: 0 when
every job compiled, 1 when one failed (its diagnostics go to stderr), 2 for a usage
error."""


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "compile",
        help="compile .cu files and folders concurrently",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("paths", nargs="*", type=Path, help=".cu files, or folders searched for them")
    p.add_argument("--examples", action="store_true", help="also compile the built-in examples")
    p.add_argument("--backend", choices=("nvrtc", "nvcc"), default="nvrtc", help="default: nvrtc")
    p.add_argument(
        "--output",
        choices=("cubin", "fatbin", "ptx"),
        default=None,
        help="default: cubin for nvrtc, fatbin for nvcc",
    )
    p.add_argument("--arch", type=arch, default=None, help="e.g. sm_90a (default: the local GPU's)")
    p.add_argument(
        "-j",
        "--jobs",
        type=positive_int,
        default=None,
        metavar="N",
        help="compiles at once (default: one per CPU)",
    )
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help="how long one job may compile",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="DIR",
        help="write one binary per input here, named after it (inputs that share a file "
        "name get their folder in the name)",
    )
    p.add_argument(
        "--dump", type=Path, default=None, metavar="DIR", help="dump every job under this folder"
    )
    p.add_argument(
        "--json", type=Path, default=None, metavar="FILE", help="write one record per job here"
    )
    p.add_argument("--cache-dir", type=Path, default=None, metavar="DIR", help="disk cache folder")
    p.add_argument("--no-cache", action="store_true", help="compile everything afresh")
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--server",
        action="store_true",
        help="compile on this user's compile server, starting it if none runs",
    )
    where.add_argument(
        "--no-server",
        action="store_true",
        help="compile in this process even when a compile server runs",
    )
    p.add_argument(
        "-X",
        "--option",
        action="append",
        default=[],
        dest="options",
        metavar="FLAG",
        help="extra compiler option (repeatable), e.g. -X=-DTILE=64 -X=--use_fast_math",
    )
    p.set_defaults(run=run, extra_options=[])


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
    # A file named twice (itself and through its folder) is compiled once.
    files = list({f.resolve(): f for f in files}.values())
    if not files:
        raise FileNotFoundError("nothing to compile: give .cu files, folders, or --examples")
    return files


def unique_names(files: Sequence[Path]) -> list[str]:
    """A distinct job (and output file) name per input: its file name without ``.cu``, or,
    for files that share one, their path below the deepest folder they all share, joined
    with ``_`` (``a/k.cu``, ``b/k.cu`` -> ``a_k``, ``b_k``); ``-2``, ``-3``... if needed."""
    stems = [safe_stem(f.stem) for f in files]
    count = Counter(stems)
    names = list(stems)
    for stem, n in count.items():
        if n < 2:
            continue
        group = [i for i, s in enumerate(stems) if s == stem]
        paths = [files[i].resolve().with_suffix("") for i in group]
        common = Path(os.path.commonpath([p.parent for p in paths]))
        for i, path in zip(group, paths, strict=True):
            names[i] = safe_stem("_".join(path.relative_to(common).parts))
    taken: set[str] = set()
    for i, name in enumerate(names):
        candidate, suffix = name, 2
        while candidate in taken:
            candidate, suffix = f"{name}-{suffix}", suffix + 1
        names[i] = candidate
        taken.add(candidate)
    return names


def compiler_options(options: Sequence[str]) -> list[str]:
    """The user's options with ``-I DIR`` / ``-D NAME`` pairs joined into one option and
    relative include folders made absolute (nvcc compiles in a temporary folder)."""
    out: list[str] = []
    pending: str | None = None
    for option in options:
        if pending is not None:
            option, pending = pending + option, None
        elif option in ("-I", "-D", "--include-path", "--define-macro"):
            pending = option + ("=" if option.startswith("--") else "")
            continue
        for prefix in ("-I", "--include-path="):
            if option.startswith(prefix) and len(option) > len(prefix):
                option = prefix + str(Path(option[len(prefix) :]).absolute())
                break
        out.append(option)
    if pending is not None:
        raise ValueError(f"compiler option {pending.rstrip('=')} needs a value")
    return out


def _check_arch(arch: str | None) -> None:
    if arch is None and local_gpu_arch() is None:
        raise ValueError("no GPU found to ask for an architecture: give --arch, e.g. sm_90a")


def run(args: argparse.Namespace) -> int:
    try:
        files = _inputs(args)
        names = unique_names(files)
        options = compiler_options([*args.options, *args.extra_options])
        _check_arch(args.arch)
        jobs = []
        for path, name in zip(files, names, strict=True):
            try:
                source = path.read_text(encoding="utf-8")
                jobs.append(
                    CompileJob(
                        source,
                        name=name,
                        backend=args.backend,
                        output=args.output,
                        arch=args.arch,
                        options=options,
                        timeout=args.timeout,
                    )
                )
            except (OSError, UnicodeDecodeError, AsyncCompError) as exc:
                raise ValueError(f"{path}: {exc}") from exc
        # Fail on an unusable output path now, not after the last compile.
        if args.out is not None:
            args.out.mkdir(parents=True, exist_ok=True)
        if args.json is not None and not args.json.parent.is_dir():
            raise FileNotFoundError(f"no such folder for --json: {args.json.parent}")
        engine = _engine(args)
    except (OSError, ValueError) as exc:  # InvalidJob is a ValueError
        return _usage_error(exc)
    renamed = [(f, n) for f, n in zip(files, names, strict=True) if n != safe_stem(f.stem)]
    if renamed:
        shown = ", ".join(f"{f} -> {n}" for f, n in renamed)
        print(
            f"asynccomp: note: inputs share file names, so some are renamed: {shown}",
            file=sys.stderr,
        )
    display: Display = (ProgressBar if sys.stdout.isatty() else JobLines)(len(jobs), sys.stdout)
    try:
        return anyio.run(_compile, engine, jobs, dict(zip(jobs, files, strict=True)), display, args)
    except (DumpDirError, ServerError) as exc:  # raised as the engine starts
        display.close()
        return _usage_error(exc)


def _engine(args: argparse.Namespace) -> Engine:
    """On the running compile server (warm, shared with other processes) when there is
    one and the run asks nothing of its own of the engine; else in this process."""
    own = args.jobs is not None or args.cache_dir is not None or args.no_cache
    if args.server and own:
        raise ValueError(
            "--server compiles with the server's settings: drop -j, --cache-dir, --no-cache"
        )
    server = "auto" if args.server else None
    if server is None and not own and not args.no_server:
        server = running_server()
    if server is not None:
        return Engine(arch=args.arch, dump_dir=args.dump, server=server)
    return Engine(
        arch=args.arch,
        nvrtc_workers=args.jobs,
        nvcc_workers=args.jobs,
        dump_dir=args.dump,
        cache=not args.no_cache,
        cache_dir=args.cache_dir,
    )


def running_server() -> str | None:
    """The socket of this user's compile server for this toolkit, if one is listening."""
    try:
        path = server_paths().socket
    except ServerError:
        return None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return None
    return str(path)


def _usage_error(exc: BaseException) -> int:
    print(f"asynccomp: error: {exc}", file=sys.stderr)
    return 2


async def _compile(
    engine: Engine,
    jobs: list[CompileJob],
    paths: dict[CompileJob, Path],
    display: Display,
    args: argparse.Namespace,
) -> int:
    started = time.monotonic()
    results: list[CompileResult] = []
    async with engine, anyio.create_task_group() as tg:
        tg.start_soon(_tick, display)
        async with engine.as_completed(jobs) as completed:
            async for result in completed:
                results.append(result)
                display.job_done(result)
                name = _output_name(result, args.out)
                if name is not None:
                    assert args.out is not None and result.binary is not None
                    (args.out / name).write_bytes(result.binary)
        tg.cancel_scope.cancel()
        versions = engine.compiler_versions
    wall = time.monotonic() - started
    display.close()
    if args.json is not None:
        records = [
            {
                **result_record(
                    r, folder=r.dump_dir, binary_name=_output_name(r, args.out), versions=versions
                ),
                "path": str(paths.get(r.job, "")),
            }
            for r in results
        ]
        args.json.write_text(json.dumps(records, indent=2) + "\n")
    print(summary(results, wall))
    failed = [r for r in results if not r.ok]
    for r in failed:
        print(f"\n--- {r.job.name}: {r.error}", file=sys.stderr)
    return 1 if failed else 0


def _output_name(result: CompileResult, out: Path | None) -> str | None:
    """The file ``--out`` gets for this result (named after its job), if any."""
    if out is None or result.binary is None:
        return None
    return f"{result.job.name}.{result.output}"


async def _tick(display: Display) -> None:
    while True:
        await anyio.sleep(0.25)
        display.tick()


def summary(results: Sequence[CompileResult], wall: float, slowest: int = 5) -> str:
    """The end-of-run report: counts, wall and summed compile time, the slowest jobs and
    the most registers and spills any kernel needed."""
    failed = [r for r in results if not r.ok]
    timed_out = sum(isinstance(r.error, CompileTimeout) for r in failed)
    cached = sum(r.cached for r in results)
    compiled = [r for r in results if not r.cached]
    compile_time = sum(r.elapsed for r in compiled)
    lines = [
        "",
        f"{len(results)} jobs: {len(results) - len(failed)} compiled ({cached} cached), "
        f"{len(failed)} failed ({timed_out} timed out) in {wall:.2f} s",
        f"compile time: {compile_time:.2f} s summed over {len(compiled)} compiles "
        f"({compile_time / wall if wall > 0 else 0:.1f}x the wall time)",
    ]
    by_time = sorted(compiled, key=lambda r: r.elapsed, reverse=True)[:slowest]
    if by_time:
        rows = [(r.job.name, job_status(r), f"{r.elapsed:.3f}", f"{r.queued:.3f}") for r in by_time]
        table = text_table(("slowest jobs", "status", "compile s", "queued s"), rows, "llrr")
        lines += ["", *("  " + line for line in table.splitlines()), ""]
    kernels = [(r.job.name, k, res) for r in results for k, res in r.resources.items()]
    if kernels:
        job, kernel, most = max(kernels, key=lambda item: item[2].registers)
        lines.append(f"most registers: {most.registers} ({job}: {kernel})")
        spilling = [(j, k, res) for j, k, res in kernels if res.spill_stores or res.spill_loads]
        if spilling:
            job, kernel, worst = max(spilling, key=lambda i: i[2].spill_stores + i[2].spill_loads)
            lines.append(
                f"spills: {len(spilling)} kernel(s); most: {worst.spill_stores} B stores, "
                f"{worst.spill_loads} B loads ({job}: {kernel})"
            )
        else:
            lines.append("spills: none")
    return "\n".join(lines)
