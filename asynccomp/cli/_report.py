"""What ``asynccomp compile`` reports when it is done: the summary, the failures (each
distinct message once) and the ``--json`` records."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..bench import text_table
from ..dumps import result_record
from ..errors import CompileTimeout
from ..job import CompileJob
from ..result import CompileResult
from ._progress import job_status

__all__ = ("count_warnings", "failures", "plural", "records", "summary")

# A diagnostic line of NVRTC, nvcc (cudafe, cicc) or ptxas that is a warning.
_WARNING = re.compile(r"(?m)^(?:.*\(\d+\): warning\b|ptxas warning\b|nvcc warning\b|.*: warning:)")


def count_warnings(log: str) -> int:
    """How many warnings the compiler wrote into ``log``."""
    return len(_WARNING.findall(log)) if log else 0


def plural(count: int, word: str) -> str:
    """``1 job``, ``2 jobs``."""
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def records(
    results: Sequence[CompileResult],
    finished_at: dict[int, float],
    unfinished: Sequence[CompileJob],
    paths: dict[CompileJob, Path],
    out_name: Any,
    versions: dict[str, str | None],
    where: str = "",
) -> list[dict[str, Any]]:
    """One JSON record per job: the finished ones (with the compiler's log, its warning
    count, the time each finished and ``where`` the run's compiles ran), then those an
    interrupt left unfinished."""
    rows = []
    for r in results:
        row = result_record(r, folder=r.dump_dir, binary_name=out_name(r), versions=versions)
        row.update(
            path=str(paths.get(r.job, "")),
            log=r.log,
            warnings_count=count_warnings(r.log),
            finished_at=_stamp(finished_at.get(id(r), time.time())),
            where=where,
        )
        rows.append(row)
    for job in unfinished:
        rows.append(
            {
                "name": job.name,
                "path": str(paths.get(job, "")),
                "backend": job.backend,
                "status": "interrupted",
                "error": "the run was interrupted before this job finished",
                "finished_at": None,
            }
        )
    return rows


def _stamp(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(when)) + f".{int(when % 1 * 1000):03d}"


def summary(
    results: Sequence[CompileResult],
    wall: float,
    *,
    total: int,
    where: str = "",
    slowest: int = 5,
) -> str:
    """The end-of-run report: counts (deduplicated: jobs answered by an identical job's
    compile), wall and summed compile time of the compiles that ran (and ``where`` they
    ran), the slowest jobs and the most registers and spills any kernel needed."""
    failed = [r for r in results if not r.ok]
    timed_out = sum(isinstance(r.error, CompileTimeout) for r in failed)
    cached = sum(r.cached for r in results if r.ok)
    shared = sum(r.shared for r in results if r.ok)
    # The jobs that ran a compiler: not those the cache or another job's compile answered.
    compiled = [r for r in results if not r.cached and not r.shared]
    compile_time = sum(r.elapsed for r in compiled)
    succeeded = len(results) - len(failed)
    warned = sum(count_warnings(r.log) > 0 for r in results)
    head = f"{plural(total, 'job')}: {succeeded} succeeded "
    head += f"({succeeded - cached - shared} compiled, {cached} from the cache"
    head += f", {shared} deduplicated), " if shared else "), "
    head += f"{len(failed)} failed"
    if timed_out:
        head += f" ({timed_out} timed out)"
    if len(results) < total:
        head += f", {total - len(results)} not run (interrupted)"
    lines = [
        "",
        f"{head} in {wall:.2f} s" + (f", {where}" if where else ""),
        f"compile time: {compile_time:.2f} s summed over the "
        f"{plural(len(compiled), 'compile')} that ran "
        f"({compile_time / wall if wall > 0 else 0:.1f}x the wall time)",
    ]
    if warned:
        lines.append(f"warnings: in {plural(warned, 'job')} (-v prints them; --json keeps them)")
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
                f"spills: {plural(len(spilling), 'kernel')}; most: {worst.spill_stores} B stores, "
                f"{worst.spill_loads} B loads ({job}: {kernel})"
            )
        else:
            lines.append("spills: none")
    return "\n".join(lines)


def failures(results: Sequence[CompileResult]) -> str:
    """Each failed job's diagnostics; an error shared by many jobs (nvcc missing for
    all of them) once, with the jobs it hit."""
    groups: dict[str, list[str]] = {}
    for r in results:
        if r.ok:
            continue
        message = str(r.error)
        # The same cause, told per job: say it once.
        generic = message.replace(repr(r.job.name), "'<job>'")
        groups.setdefault(generic, []).append(r.job.name)
    blocks = []
    for message, names in groups.items():
        if len(names) == 1:
            blocks.append(
                f"--- {names[0]}: {message.replace(chr(39) + '<job>' + chr(39), repr(names[0]))}"
            )
        else:
            shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
            blocks.append(f"--- {len(names)} jobs ({shown}): {message}")
    return "\n\n".join(blocks)
