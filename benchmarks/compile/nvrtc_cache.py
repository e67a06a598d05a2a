"""Which changes to a job miss NVRTC's own cache? (issue 36)

NVRTC 12.9 and later keep a cache of compiled programs in the CUDA driver's compute
cache (``~/.nv/ComputeCache``, or ``$CUDA_CACHE_PATH``), shared by every process of the
machine, whenever a driver is loaded (so on GPU machines only; ``CUDA_CACHE_DISABLE=1``
turns it off). A benchmark that means to compile must miss it. This compiles one kernel
in a fresh process per variant, all sharing one new cache folder, in this order:

    original          the kernel as it is (a miss: the folder is new)
    again             the same (a hit, where the cache works)
    comment           a comment appended to the source
    define            the original with one more ``-D`` option
    disabled          the original with ``CUDA_CACHE_DISABLE=1`` (never a hit)

and prints each compile's seconds. Without a driver all five take the same time.

    python -m benchmarks.compile.nvrtc_cache --corpus corpus --largest 1
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from benchmarks._corpus import add_corpus_argument, largest_files

VARIANTS = ("original", "again", "comment", "define", "disabled")


def _compile(path: str, arch: str, variant: str) -> float:
    """One compile of ``path`` changed as ``variant`` says, in this process: its seconds."""
    from dataclasses import replace

    import anyio

    from asynccomp import Engine
    from asynccomp.tvm import make_job

    job = make_job(Path(path).read_text(), arch=arch)
    if variant == "comment":
        job = replace(job, source=job.source + "\n// asynccomp: a comment\n")
    elif variant == "define":
        job = replace(job, options=(*job.options, "-DASYNCCOMP_CACHE_PROBE=1"))

    async def run() -> float:
        async with Engine(arch=arch, nvrtc_workers=1, cache=False) as engine:
            (result,) = await engine.compile_many([job])
        assert result.ok, result.error
        return result.elapsed

    return anyio.run(run)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_corpus_argument(parser)
    parser.add_argument("--largest", type=int, default=1, help="the N largest kernels")
    parser.add_argument("--arch", default="sm_90a")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one is not None:
        print(json.dumps(_compile(args.one[0], args.arch, args.one[1])))
        return 0
    found: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="asynccomp-nvrtc-cache-") as folder:
        for path in largest_files(args.corpus, args.largest):
            times = found.setdefault(Path(path).name, {})
            for variant in VARIANTS:
                env = {**os.environ, "CUDA_CACHE_PATH": folder}
                env.pop("CUDA_CACHE_DISABLE", None)
                if variant == "disabled":
                    env["CUDA_CACHE_DISABLE"] = "1"
                command: list[str | Path] = [sys.executable, "-m", "benchmarks.compile.nvrtc_cache"]
                command += ["--arch", args.arch, "--one", path, variant]
                done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    print(done.stderr[-2000:], file=sys.stderr)
                    return 1
                times[variant] = round(json.loads(done.stdout.splitlines()[-1]), 3)
            print(f"{Path(path).name}: " + ", ".join(f"{k} {v:.3f} s" for k, v in times.items()))
        cached = sum(1 for _ in Path(folder).rglob("*") if _.is_file())
        print(f"files in the cache folder: {cached}")
    if args.json is not None:
        args.json.write_text(json.dumps(found, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
