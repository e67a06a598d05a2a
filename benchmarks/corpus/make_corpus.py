"""Generate a benchmark corpus of TVM MetaSchedule CUDA candidates, deterministically.

The README's headline numbers were measured on a corpus of 60 CUDA kernels, the
developers' own; this script makes an equivalent one from scratch (the same ten
workloads, the same TVM, the same target, the same sampling, and the same naming) into
the folder ``--out`` names. The benchmarks read it with ``--corpus DIR`` (without it they
compile the built-in examples); ``corpus/`` at the checkout's root, the folder the README
uses, is in ``.gitignore``.

What it does, per workload (default: GMM:0, GMM:1, C1D:0, C2D:1, DEP:0, NRM:0, SFM:0,
CBR:0, TBG:0, T2D:0 from ``tvm.s_tir.meta_schedule.testing.te_workload``):

1. ``ms.TuneContext(mod, target, space_generator=PostOrderApply(), search_strategy=
   ReplayTrace(), rand_state=SEED, num_threads=1)``: the default CUDA design space of the
   target (schedule rules, postprocessors and mutators "from-target", exactly what
   ``ms.tune_tir`` uses) and MetaSchedule's replay-trace search strategy;
2. ``ctx.pre_tuning`` + ``ctx.generate_measure_candidates``: ReplayTrace picks a design
   space at random, replays its trace with fresh random decisions and applies the CUDA
   postprocessors (``RewriteCooperativeFetch``, ``RewriteUnboundBlock``,
   ``RewriteParallelVectorizeUnroll``, ``RewriteReductionBlock``, ``VerifyGPUCode``,
   ...); a candidate whose postprocessing fails is redrawn inside TVM, as in tuning;
3. each candidate is built the way MetaSchedule's ``LocalBuilder`` builds it
   (``RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)`` then ``tvm.compile``);
   a candidate whose lowering fails is skipped (MetaSchedule would record a build error)
   and further batches are drawn until N candidates have been found;
4. the CUDA source is the string TVM's codegen hands to ``tvm_callback_cuda_compile``:
   on a machine without ``libcuda.so.1`` ``tvm.compile`` keeps it in a fallback CUDA
   module and ``lib.mod.imports[0].inspect_source()`` returns it verbatim, so no GPU and no
   CUDA compiler is needed (on a GPU machine ``tvm.compile`` also calls TVM's callback,
   which only costs time; the module still returns the same source).

Files are written as ``<workload>_<idx>_<k>_<sha12>.cu`` (``GMM_0_003_2100842c1a53.cu``),
``k`` the candidate's index in sampling order and ``sha12`` the first 12 hex digits of
the SHA-256 of the file's bytes, as in the developers' corpus. ReplayTrace does not
deduplicate, so two candidates can have the same source (NRM:0 often does), as in the
developers' corpus. A ``README.md`` describing the run is written next to the kernels.

Determinism: ``num_threads=1`` makes the sampling a single random stream per workload
(ReplayTrace forks one random state per thread and hands candidates to threads
dynamically, so with more threads the order, and which candidates are drawn, depends
on thread timing). Two runs with the same seed give byte-identical folders
(``diff -r``). The developers' corpus was evidently sampled with 2
threads and rand_state 7: with the default ``--seed 7`` this script reproduces 37 of its
60 files byte for byte (its other candidates came from the second thread's random
stream, which a one-thread run does not draw), and the rest are further candidates of
the same design spaces. Seeds 0 and 1 give the same samples.
The difference shows in compile time: on one NVRTC worker (2-core CPU, NVRTC 13.5,
``--style tvm``) the 60 generated kernels took 48.1 s in all, the developers' 37.9 s (the
37 common files 25.9 s and 26.0 s), the extra time from two large TBG:0 and one CBR:0
candidates; every kernel compiled.

Setup (a venv outside the repository; apache-tvm-ffi 0.1.15.post2 segfaults in
MetaSchedule, hence the pin):

    python3 -m venv /work/tvmvenv
    /work/tvmvenv/bin/pip install apache-tvm==0.27.0.post1 'apache-tvm-ffi==0.1.14.post0'

Run (from the repository root):

    /work/tvmvenv/bin/python -m benchmarks.corpus.make_corpus --out corpus
    /work/tvmvenv/bin/python -m benchmarks.corpus.make_corpus --out DIR --per-workload 6 \\
        --seed 7 --workloads GMM:0,SFM:0 --target nvidia/nvidia-h100

It takes about 35 s for the default 60 kernels on a 2-core CPU machine (one process, one
thread; about 10 s of it is importing TVM and its first design space). Then, e.g.:

    asynccomp bench --corpus corpus --configs processes --workers 1
    python -m benchmarks.compile.nvrtc_scaling --corpus corpus
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

DEFAULT_WORKLOADS = "GMM:0,GMM:1,C1D:0,C2D:1,DEP:0,NRM:0,SFM:0,CBR:0,TBG:0,T2D:0"
DEFAULT_TARGET = "nvidia/nvidia-h100"
DEFAULT_SEED = 7
MAX_BATCHES = 50


def _build_source(sch: Any, target: Any) -> str:
    """Lower and codegen one candidate as MetaSchedule's LocalBuilder does; the CUDA source."""
    import tvm  # pylint: disable=import-outside-toplevel
    from tvm.s_tir.transform import (  # pylint: disable=import-outside-toplevel
        RemoveWeightLayoutRewriteBlock,
    )

    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(sch.mod)
    lib = tvm.compile(mod, target=target)
    cuda_mods = [m for m in lib.mod.imports if m.kind == "cuda"]
    if len(cuda_mods) != 1:
        raise RuntimeError(f"expected one CUDA module, got {list(lib.mod.imports)}")
    src: str = cuda_mods[0].inspect_source()
    if not src:
        raise RuntimeError("the CUDA module returned no source")
    return src


def sample_workload(
    name: str,
    idx: int,
    n: int,
    seed: int,
    target: Any,
    log: Callable[[str], object] = print,
) -> list[str]:
    """N CUDA sources of ReplayTrace candidates for te_workload ``name:idx``, in order."""
    # pylint: disable=import-outside-toplevel
    from tvm.s_tir import meta_schedule as ms
    from tvm.s_tir.meta_schedule.testing.te_workload import create_te_workload

    # pylint: enable=import-outside-toplevel
    ctx = ms.TuneContext(
        mod=create_te_workload(name, idx),
        target=target,
        space_generator=ms.space_generator.PostOrderApply(),  # rules/postprocs from target
        search_strategy=ms.search_strategy.ReplayTrace(),
        task_name=f"{name}:{idx}",
        rand_state=seed,
        num_threads=1,
    )
    spaces = ctx.generate_design_space()
    ctx.pre_tuning(max_trials=n * MAX_BATCHES, num_trials_per_iter=n, design_spaces=spaces)
    sources: list[str] = []
    drawn = 0
    while len(sources) < n:
        cands = ctx.generate_measure_candidates()
        if cands is None:
            raise RuntimeError(
                f"{name}:{idx}: only {len(sources)} of {n} candidates built "
                f"after {MAX_BATCHES} batches"
            )
        for cand in cands:
            if len(sources) == n:
                break
            drawn += 1
            try:
                sources.append(_build_source(cand.sch, target))
            except Exception as err:  # pylint: disable=broad-except
                log(
                    f"  {name}:{idx} candidate {drawn}: build failed, skipped "
                    f"({type(err).__name__}: {str(err).strip().splitlines()[-1][:200]})"
                )
        # ReplayTrace only moves on to the next batch once it has been told the results.
        ctx.notify_runner_results(cands, [])
    ctx.post_tuning()
    log(f"  {name}:{idx}: {len(spaces)} design spaces, {drawn} candidates drawn for {n}")
    return sources


def _readme(args: argparse.Namespace, argv_line: str, tvm_version: str, written: list[str]) -> str:
    return (
        "# Generated benchmark corpus\n\n"
        f"{len(written)} CUDA sources generated by Apache TVM {tvm_version} for MetaSchedule\n"
        "autotuning candidates: `ReplayTrace` samples (one thread, "
        f"`rand_state={args.seed}`) of the default\n"
        f"CUDA design space for target `{args.target}`, {args.per_workload} candidates each "
        f"of {args.workloads}\n"
        "from `tvm.s_tir.meta_schedule.testing.te_workload`. File names: "
        "`<workload>_<idx>_<k>_<sha12>.cu`\n"
        "(sha12: the first 12 hex digits of the file's SHA-256). Each file is what TVM "
        "passes to\n`tvm_callback_cuda_compile`.\n\n"
        f"Made by `benchmarks/corpus/make_corpus.py` of asynccomp:\n\n    {argv_line}\n"
    )


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out",
        type=Path,
        required=True,
        help="output folder (created); `corpus` at the checkout's root is git-ignored",
    )
    ap.add_argument(
        "--per-workload",
        type=int,
        default=6,
        metavar="N",
        help="candidates per workload (default 6)",
    )
    ap.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        help=f"MetaSchedule rand_state, >= 0 (default {DEFAULT_SEED})",
    )
    ap.add_argument(
        "--workloads",
        default=DEFAULT_WORKLOADS,
        help=f"comma-separated NAME:IDX of te_workload (default {DEFAULT_WORKLOADS})",
    )
    ap.add_argument(
        "--target",
        default=DEFAULT_TARGET,
        help=f"TVM target tag or JSON (default {DEFAULT_TARGET}, sm_90a)",
    )
    args = ap.parse_args(argv)
    if args.seed < 0:
        ap.error("--seed must be >= 0 (a negative rand_state means a random seed)")
    if args.per_workload < 1:
        ap.error("--per-workload must be >= 1")
    workloads = []
    for item in args.workloads.split(","):
        name, _, idx = item.strip().partition(":")
        if not name or not idx.isdigit():
            ap.error(f"bad workload {item!r}: expected NAME:IDX, e.g. GMM:0")
        workloads.append((name, int(idx)))

    import tvm  # pylint: disable=import-outside-toplevel

    target = tvm.target.Target(args.target)
    args.out.mkdir(parents=True, exist_ok=True)
    stale = sorted(args.out.glob("*.cu"))
    if stale:
        ap.error(f"{args.out} already holds {len(stale)} .cu files; use an empty folder")

    t_all = time.perf_counter()
    written: list[str] = []
    for name, idx in workloads:
        t0 = time.perf_counter()
        for k, src in enumerate(sample_workload(name, idx, args.per_workload, args.seed, target)):
            data = src.encode()
            path = args.out / f"{name}_{idx}_{k:03d}_{hashlib.sha256(data).hexdigest()[:12]}.cu"
            path.write_bytes(data)
            written.append(path.name)
            print(f"{path}: {len(data)} bytes", flush=True)
        print(f"{name}:{idx} done in {time.perf_counter() - t0:.1f} s", flush=True)

    argv_line = (
        f"python -m benchmarks.corpus.make_corpus --out DIR --per-workload "
        f"{args.per_workload} --seed {args.seed} --workloads {args.workloads} "
        f"--target {args.target}"
    )
    (args.out / "README.md").write_text(_readme(args, argv_line, tvm.__version__, written))
    print(f"{len(written)} kernels in {args.out} in {time.perf_counter() - t_all:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
