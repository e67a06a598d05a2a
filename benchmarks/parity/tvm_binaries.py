"""asynccomp.tvm against TVM 0.27 over a corpus of TVM kernels: the same binaries?

Every kernel is compiled the way TVM's callback compiles it (``arch=None`` inside a
``tvm.target.Target`` scope; NVRTC -> cubin, nvcc -> fatbin), once by TVM's own
``tvm.support.nvcc.compile_cuda`` and twice by ``asynccomp.tvm.compile_cuda``:

- with the preamble fast path off (``ASYNCCOMP_TVM_FAST_PATH=0``): the bytes must be
  identical to TVM's;
- with it on (the default): the SASS (``cuobjdump -sass``) must be identical to TVM's.
  (The fast path rewrites NVRTC sources only; nvcc's fast-path run is a cache hit.)

Needs TVM (``pip install -e '.[tvm]'``; ``apache-tvm==0.27.0.post1``). Both sides use one
toolkit: ``$CUDA_PATH``, set to ``/usr/local/cuda`` when unset, since TVM's own lookup
(``realpath(which nvcc)/../..``) misreads a wrapper script such as ``/usr/local/bin/nvcc``.
asynccomp compiles into a fresh, private cache folder (``--cache-dir`` to choose one), so
nothing comes from an earlier run.

    python -m benchmarks.parity.tvm_binaries                   # the built-in examples, both
    python -m benchmarks.parity.tvm_binaries --compilers nvrtc
    python -m benchmarks.parity.tvm_binaries --compilers nvcc --limit 20 --jobs 2

Exit status: 0 when every kernel compiled on every side and was identical, else 1.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks._corpus import add_corpus_argument, corpus_files
from benchmarks.parity.fast_path_sass import find_cuobjdump, sass_of

FORMATS = {"nvrtc": "cubin", "nvcc": "fatbin"}


@dataclass
class Outcome:
    """One kernel under one compiler."""

    name: str
    size: int
    tvm: bytes | None = None
    exact: bytes | None = None  # asynccomp, fast path off
    fast: bytes | None = None  # asynccomp, fast path on
    errors: list[str] = field(default_factory=list)
    bytes_same: bool = False
    sass_same: bool = False


def _attempt(outcome: Outcome, side: str, compile_: Callable[[], bytearray]) -> bytes | None:
    try:
        return bytes(compile_())
    except Exception as exc:  # a failing kernel is reported, the sweep goes on
        outcome.errors.append(f"{side}: {type(exc).__name__}: {str(exc)[-300:]}")
        return None


def run_compiler(
    compiler: str, files: Sequence[Path], arch: str, jobs: int, cuobjdump: str
) -> tuple[list[Outcome], dict[str, float]]:
    import tvm

    import asynccomp.tvm

    fmt = FORMATS[compiler]
    target = {"kind": "cuda", "arch": arch}
    outcomes = [Outcome(f.stem, f.stat().st_size) for f in files]
    sources = [f.read_text() for f in files]
    walls: dict[str, float] = {}

    def tvm_compile(index: int) -> None:
        with tvm.target.Target(target):  # a thread-local scope: entered in each thread
            outcomes[index].tvm = _attempt(
                outcomes[index],
                "TVM",
                lambda: tvm.support.nvcc.compile_cuda(
                    sources[index], target_format=fmt, compiler=compiler
                ),
            )

    start = time.perf_counter()
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(tvm_compile, range(len(files))))
    walls["TVM"] = time.perf_counter() - start

    for fast_path, attribute in (("0", "exact"), ("1", "fast")):
        side = f"asynccomp, fast path {'on' if fast_path == '1' else 'off'}"
        os.environ["ASYNCCOMP_TVM_FAST_PATH"] = fast_path
        start = time.perf_counter()
        with tvm.target.Target(target):
            asynccomp.tvm.prefetch(sources, fmt, compiler=compiler)  # all at once, then
            for outcome, source in zip(outcomes, sources, strict=True):  # collect in order
                compile_ = functools.partial(
                    asynccomp.tvm.compile_cuda, source, fmt, compiler=compiler
                )
                setattr(outcome, attribute, _attempt(outcome, side, compile_))
        walls[side] = time.perf_counter() - start
    os.environ.pop("ASYNCCOMP_TVM_FAST_PATH", None)

    for outcome in outcomes:
        if outcome.tvm is None:
            continue
        outcome.bytes_same = outcome.exact == outcome.tvm
        if outcome.fast is not None:
            theirs = sass_of(outcome.tvm, cuobjdump)
            outcome.sass_same = bool(theirs.strip()) and sass_of(outcome.fast, cuobjdump) == theirs
    return outcomes, walls


def _yes(flag: bool) -> str:
    return "yes" if flag else "NO"


def report(compiler: str, outcomes: Sequence[Outcome], walls: dict[str, float]) -> bool:
    fmt = FORMATS[compiler]
    print(f"\n{compiler} -> {fmt}")
    header = f"{'kernel':<28} {'KB':>5} {'bytes same (fast off)':>22} {'SASS same (fast on)':>20}"
    print(header)
    print("-" * len(header))
    for o in outcomes:
        print(
            f"{o.name:<28} {o.size / 1024:>5.0f} {_yes(o.bytes_same):>22} {_yes(o.sass_same):>20}"
        )
        for error in o.errors:
            print(f"    ERROR {error}")
    n = len(outcomes)
    bytes_same = sum(o.bytes_same for o in outcomes)
    sass_same = sum(o.sass_same for o in outcomes)
    fast_bytes = sum(o.fast is not None and o.fast == o.tvm for o in outcomes)
    print(f"  {compiler}: byte-identical with the fast path off: {bytes_same}/{n}")
    print(f"  {compiler}: SASS-identical with the fast path on:  {sass_same}/{n}")
    print(f"  {compiler}: byte-identical with the fast path on:  {fast_bytes}/{n}")
    print("  wall: " + ", ".join(f"{side} {t:.1f} s" for side, t in walls.items()))
    return bytes_same == n and sass_same == n


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_argument(parser)
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument(
        "--compilers", default="nvrtc,nvcc", help="comma-separated: nvrtc, nvcc (default both)"
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N kernels")
    parser.add_argument(
        "--jobs", type=int, default=os.cpu_count() or 1, help="TVM-side threads (default: CPUs)"
    )
    parser.add_argument("--cache-dir", type=Path, default=None, help="asynccomp's cache folder")
    args = parser.parse_args(argv)

    compilers = [c.strip() for c in args.compilers.split(",") if c.strip()]
    unknown = [c for c in compilers if c not in FORMATS]
    if unknown or not compilers:
        parser.error(f"--compilers takes nvrtc and/or nvcc, not {unknown or args.compilers!r}")
    files = corpus_files(args.corpus)[: args.limit]
    if not os.environ.get("CUDA_PATH") and Path("/usr/local/cuda/include").is_dir():
        os.environ["CUDA_PATH"] = "/usr/local/cuda"
    cache = tempfile.TemporaryDirectory(prefix="tvm_parity_cache_")
    os.environ["ASYNCCOMP_CACHE_DIR"] = str(args.cache_dir or cache.name)
    try:
        import tvm
    except ImportError as exc:
        print(f"TVM is needed (pip install -e '.[tvm]'): {exc}", file=sys.stderr)
        return 1
    cuobjdump = find_cuobjdump()
    from asynccomp import find_toolkit
    from asynccomp.backends import NvrtcBackend

    toolkit = find_toolkit()
    where = args.corpus or "the built-in examples"
    print(f"corpus: {where} ({len(files)} kernels), arch {args.arch}, TVM {tvm.__version__}")
    print(f"CUDA_PATH={os.environ.get('CUDA_PATH')}; nvcc {toolkit.nvcc_version}; ", end="")
    print(f"NVRTC {NvrtcBackend.version(toolkit)}; TVM-side threads: {args.jobs}")
    print(f"asynccomp cache: {os.environ['ASYNCCOMP_CACHE_DIR']}")

    all_same = True
    try:
        for compiler in compilers:
            outcomes, walls = run_compiler(compiler, files, args.arch, args.jobs, cuobjdump)
            all_same &= report(compiler, outcomes, walls)
    finally:
        import asynccomp.tvm

        asynccomp.tvm.shutdown()
        cache.cleanup()
    print(f"\nRESULT: {'PASS' if all_same else 'FAIL'}")
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())
