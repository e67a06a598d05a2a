"""``asynccomp compile``: compile .cu files and folders of them, many at once."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from .._os import listening
from .._perms import make_folders, umask_of, write_new
from ..backends import CompilerBackend, backend_class, backend_names
from ..backends._base import safe_stem
from ..engine import Engine
from ..errors import AsyncCompError, ClusterError, DumpDirError, InvalidJob, ServerError
from ..gpu import local_gpu_arch
from ..job import DEFAULT_BACKEND, OUTPUT_FORMATS, CompileJob
from ..server import server_paths
from ._args import JOBS_HELP, JobsAction, add_umask, arch, positive_float
from ._compile_run import CompileRun, quiet_ctrl_c
from ._inputs import compiler_options, find_inputs, read_source, source_options, unique_names
from ._json_file import file_state
from ._messages import in_cli_terms
from ._ray_args import add_ray_timeout, ray_address, ray_executor

__all__ = (
    "add_ray_timeout",
    "compiler_options",
    "ray_executor",
    "running_server",
    "unique_names",
)

DESCRIPTION = """\
Compile .cu files, and every .cu file under the given folders, concurrently.

Extra compiler options go after -X (-X=--use_fast_math, -X=-DTILE=64) or after a lone
--, which passes everything behind it to the compiler as is:
  asynccomp compile kernels/ --arch sm_90a -- -DTILE=64 -Iinclude --use_fast_math
Relative -I folders are made absolute (nvcc runs in a folder of its own).

When this user's compile server runs (`asynccomp serve`), the jobs go there: its
workers are warm and its cache is shared with every other process. --server starts
it if needed; --no-server, --cache-dir and --no-cache compile in this process. -j N
with a server running compiles there, with the server's workers (a warning says how
many): --no-server -j N compiles in this process with N.
--ray ADDRESS compiles on a Ray cluster's actors (asynccomp.ray), this process keeping
the cache, dumps and results.

On a terminal a progress bar shows done/failed/cached counts, the jobs compiling now
and an ETA from the estimated compile times; otherwise each finished job prints one line
(with its warning count; -v prints the warnings, -q only failures). A summary follows.
Ctrl-C stops the run: what finished is summarized (and written with --json, the rest
marked interrupted). --json - writes the records to stdout (the summary then goes to
stderr). Exit status: 0 when every job compiled, 1 when one failed (its diagnostics go to
stderr), 2 for a usage error, 3 when every job compiled but inputs were skipped (a
folder that cannot be listed, a dangling link or a loop, a FIFO named x.cu: one line
each on stderr), 130 when interrupted."""


def _or(names: list[str]) -> str:
    return " or ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} or {names[-1]}"


def _grouped(key: Any) -> dict[str, list[str]]:
    """The registered backends' names grouped by ``key(backend class)``, in registry order."""
    groups: dict[str, list[str]] = {}
    for name in backend_names():
        groups.setdefault(key(backend_class(name)), []).append(name)
    return groups


def paths_help() -> str:
    """The help of the sources argument: each suffix the backends compile, from the
    registry (a new backend shows up by itself)."""
    by_suffix = _grouped(lambda b: b.source_suffix)
    default_suffix = backend_class(DEFAULT_BACKEND).source_suffix
    others = [
        f"{suffix} with --backend {_or(names)}"
        for suffix, names in by_suffix.items()
        if suffix != default_suffix
    ]
    return f"source files ({'; '.join([default_suffix, *others])}), or folders searched for them"


def backend_help() -> str:
    """The help of --backend: what each registered backend compiles."""
    by_source = _grouped(lambda b: f"{b.source_language} ({b.source_suffix} files)")
    kinds = "; ".join(f"{', '.join(names)}: {source}" for source, names in by_source.items())
    return f"default: {DEFAULT_BACKEND}; {kinds}"


def output_help() -> str:
    """The help of --output: each registered backend's default output."""
    by_output = _grouped(lambda b: b.outputs[0])
    each = "; ".join(f"{', '.join(names)}: {output}" for output, names in by_output.items())
    return f"default: the backend's ({each})"


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "compile",
        help="compile .cu files and folders concurrently",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "paths",
        nargs="*",
        type=Path,
        help=paths_help(),
    )
    p.add_argument("--examples", action="store_true", help="also compile the built-in examples")
    p.add_argument(
        "--backend",
        choices=backend_names(),
        default=DEFAULT_BACKEND,
        help=backend_help(),
    )
    p.add_argument(
        "--output",
        choices=OUTPUT_FORMATS,
        default=None,
        help=output_help(),
    )
    p.add_argument("--arch", type=arch, default=None, help="e.g. sm_90a (default: the local GPU's)")
    p.add_argument("-j", "--jobs", action=JobsAction, default=None, metavar="N", help=JOBS_HELP)
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
        "--json",
        default=None,
        metavar="FILE",
        help="write one record per job here (- for stdout): status, error, compiler log, "
        "warning count, times, binary, resources",
    )
    talk = p.add_mutually_exclusive_group()
    talk.add_argument(
        "-q", "--quiet", action="store_true", help="print failures and the summary only"
    )
    talk.add_argument("-v", "--verbose", action="store_true", help="print each job's warnings")
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
        "--ray",
        type=ray_address,
        default=None,
        metavar="ADDRESS",
        help="compile on actors of a Ray cluster: auto (the one this machine belongs to), "
        "HOST:PORT or ray://HOST:PORT (needs Ray: pip install ray)",
    )
    p.add_argument(
        "--ray-fallback",
        action="store_true",
        help="with --ray: compile in this process if the cluster cannot be used",
    )
    add_ray_timeout(p)
    p.add_argument(
        "-X",
        "--option",
        action="append",
        default=[],
        dest="options",
        metavar="FLAG",
        help="extra compiler option (repeatable), e.g. -X=-DTILE=64 -X=--use_fast_math",
    )
    add_umask(p)
    p.set_defaults(run=run, extra_options=[])


def _check_arch(arch: str | None) -> None:
    if arch is None and local_gpu_arch() is None:
        raise ValueError("no GPU found to ask for an architecture: give --arch, e.g. sm_90a")


def _output_for_arch(args: argparse.Namespace) -> None:
    """A virtual architecture (``compute_90a``) compiles to PTX, as with nvcc and NVRTC:
    ``--output cubin`` (SASS for one real GPU) is refused with it, not quietly compiled
    for ``sm_90a``; without ``--output`` NVRTC gives PTX (nvcc: a fatbin holding PTX)."""
    if args.arch is None or not args.arch.startswith("compute_"):
        return
    real = "sm_" + args.arch.removeprefix("compute_")
    outputs = backend_class(args.backend).outputs
    virtual = [o for o in outputs if o != "cubin"]  # what holds PTX
    if args.output == "cubin" or (args.output is None and not virtual):
        other = " or ".join(f"--output {o}" for o in virtual)
        other = other or f"not with --backend {args.backend}"
        raise ValueError(
            f"--output cubin needs a real GPU architecture (--arch {real}): {args.arch} is a "
            f"virtual one, which compiles to PTX ({other})"
        )
    if args.output is None and outputs[0] == "cubin":
        args.output = "ptx"


def _backend(args: argparse.Namespace) -> type[CompilerBackend]:
    """The backend asked for, once what the run asks of it is something it takes."""
    backend = backend_class(args.backend)
    if args.examples and backend.source_suffix != ".cu":
        raise ValueError(
            f"--examples are CUDA C++ (.cu): --backend {args.backend} compiles "
            f"{backend.source_language} ({backend.source_suffix})"
        )
    return backend


def _check_outputs(args: argparse.Namespace) -> None:
    """An output that cannot be written fails now, before any compile (exit 2)."""
    if args.out is not None:
        try:
            make_folders(args.out, umask_of(None))
            probe = args.out / f".asynccomp-probe-{os.getpid()}"
            write_new(probe, b"", umask_of(None))
            probe.unlink()
        except OSError as exc:
            raise OSError(f"--out {args.out} cannot be written: {exc.strerror or exc}") from None
    if args.json is not None and args.json != "-":
        path = Path(args.json)
        # What was there before the run: replaced; what another run writes meanwhile: kept.
        args.json_state = file_state(path)
        existed = path.exists()
        try:
            with open(path, "a"):
                pass
        except OSError as exc:
            raise OSError(f"--json {path} cannot be written: {exc.strerror or exc}") from None
        if not existed:
            path.unlink()


def _jobs(
    args: argparse.Namespace, files: list[Path], names: list[str], skipped: list[str]
) -> tuple[list[CompileJob], list[Path]]:
    """A job per file, and the files they are for; a file that cannot be read is
    added to ``skipped`` (the others compile)."""
    options = compiler_options([*args.options, *args.extra_options])
    jobs, read = [], []
    for path, name in zip(files, names, strict=True):
        try:
            source = read_source(path)
        except OSError as exc:
            skipped.append(f"{path}: cannot be read ({exc.strerror or exc})")
            continue
        try:
            jobs.append(
                CompileJob(
                    source,
                    name=name,
                    backend=args.backend,
                    output=args.output,
                    arch=args.arch,
                    options=[*source_options(path, source), *options],
                    timeout=args.timeout,
                )
            )
        except AsyncCompError as exc:
            raise ValueError(f"{path}: {exc}") from exc
        read.append(path)
    if not jobs:
        raise FileNotFoundError("nothing to compile: no input could be read")
    return jobs, read


def run(args: argparse.Namespace) -> int:
    skipped: list[str] = []
    try:
        backend = _backend(args)
        inputs = find_inputs(args.paths, args.examples, suffix=backend.source_suffix)
        skipped, files = inputs.skipped, inputs.files
        if not files:
            raise FileNotFoundError(
                f"nothing to compile: give {backend.source_suffix} files, folders, or --examples"
            )
        names = unique_names(files)
        _check_arch(args.arch)
        _output_for_arch(args)
        jobs, files = _jobs(args, files, names, skipped)
        names = [job.name for job in jobs]
        _check_outputs(args)
        engine = _engine(args)
    except (OSError, ValueError) as exc:  # InvalidJob is a ValueError
        _say_skipped(skipped)
        return _usage_error(exc)
    _say_skipped(skipped)
    renamed = [(f, n) for f, n in zip(files, names, strict=True) if n != safe_stem(f.stem)]
    if renamed and not args.quiet:
        shown = ", ".join(f"{f} -> {n}" for f, n in renamed)
        print(
            f"asynccomp: note: inputs share file names, so some are renamed: {shown}",
            file=sys.stderr,
        )
    # With --json -, stdout carries the records: everything else goes to stderr.
    out = sys.stderr if args.json == "-" else sys.stdout
    state = CompileRun(engine, jobs, dict(zip(jobs, files, strict=True)), args, out)
    state.skipped = len(skipped)
    with quiet_ctrl_c(out):
        try:
            return anyio.run(state.compile)
        except (DumpDirError, ServerError, ClusterError, InvalidJob) as exc:  # as it starts
            if state.display is not None:
                state.display.close()
            return _usage_error(exc)


def _engine(args: argparse.Namespace) -> Engine:
    """On the running compile server (warm, shared with other processes) when there is
    one and the run asks no cache or executor of its own; else in this process.

    ``-j`` does not keep a run off a running server: its workers are there and warm (a
    run in process would start and warm its own), so the run compiles there and is told
    once what the server runs instead (:func:`._compile_run.ignored_jobs`); ``--no-server`` takes
    ``-j`` at its word."""
    executor = ray_executor(args)
    own = args.cache_dir is not None or args.no_cache or executor is not None
    if args.server and own:
        raise ValueError(
            "--server compiles with the server's settings: drop --cache-dir, --no-cache, "
            "--ray (or start the server with asynccomp serve --ray)"
        )
    server = "auto" if args.server else None
    if server is None and not own and not args.no_server:
        server = running_server()
    if server is not None:
        return Engine(arch=args.arch, dump_dir=args.dump, server=server)
    return Engine(
        arch=args.arch,
        workers=args.jobs,
        dump_dir=args.dump,
        cache=not args.no_cache,
        cache_dir=args.cache_dir,
        executor=executor,
    )


def running_server() -> str | None:
    """The socket of this user's compile server for this toolkit, if one is listening."""
    try:
        path = server_paths().socket
    except ServerError:
        return None
    return str(path) if listening(path) else None


def _say_skipped(skipped: list[str]) -> None:
    """One line per input that will not be compiled (exit status 3 says so at the end)."""
    for line in skipped:
        print(f"asynccomp: skipped {line}", file=sys.stderr)


def _usage_error(exc: BaseException) -> int:
    print(f"asynccomp: error: {in_cli_terms(exc)}", file=sys.stderr)
    return 2
