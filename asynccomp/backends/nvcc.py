"""nvcc as concurrent subprocesses (:class:`._tool.ProgramBackend` runs them: a work
folder per job, a guard that kills nvcc's whole group, failures that are not the
source's told apart).

Where an nvcc option is rendered: :meth:`NvccBackend.prepare`, here (with
:func:`._base.add_shared_options` for the two NVRTC spells alike), and nowhere else.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import InvalidJob, ToolkitNotFound
from ..job import CompileJob, parse_arch
from ..toolkit import Toolkit
from ._base import (
    BackendOptions,
    BackendSettings,
    CompilerBackend,
    PreparedCompile,
    add_shared_options,
    safe_stem,
    with_caller_folders,
)
from ._named_files import reads_system_folders
from ._tool import ProgramBackend

__all__ = ("NvccBackend", "nvcc_arch_flags")

# nvcc runs its tools through sh, with each option inside double quotes: there "$" and
# "`" expand (-DY=$(cmd) runs cmd: tested), a backslash escapes, and a line break
# starts a new line of the script. Everything else (; | & < > ' " spaces) reaches the
# tools as it was given (tested).
_SHELL_SPECIAL = {
    "$": "'$' expands in the shell nvcc runs its tools through ($(...) would run a command)",
    "`": "'`' runs a command in the shell nvcc runs its tools through",
    "\\": "nvcc's shell would read the backslash as an escape and drop it",
    "\n": "a line break ends the command in the shell nvcc runs its tools through",
    "\r": "a carriage return reaches nvcc's shell as part of a command line",
}


def _check_for_shell(option: str) -> None:
    for char, why in _SHELL_SPECIAL.items():
        if char in option:
            raise InvalidJob("options", option, f"refused for nvcc: {why}")


def nvcc_arch_flags(arch: str, output: str) -> list[str]:
    """``-gencode``/``-arch`` flags for ``arch`` (``sm_90a`` or ``compute_90a``) and format."""
    family, number, suffix = parse_arch(arch)
    virtual, real = f"compute_{number}{suffix}", f"sm_{number}{suffix}"
    if output == "ptx":
        return [f"-arch={virtual}"]
    if output == "cubin":
        return [f"-arch={real}"]
    # fatbin: SASS for an sm_ arch (TVM's form); PTX only when a compute_ arch was asked for.
    code = virtual if family == "compute" else real
    return ["-gencode", f"arch={virtual},code={code}"]


class NvccBackend(ProgramBackend):
    """nvcc, one subprocess per running job; the engine bounds how many run at once."""

    name = "nvcc"
    tool = "nvcc"
    outputs = ("fatbin", "cubin", "ptx")
    # Medians over the shared TVM corpus (nvcc --fatbin), rounded.
    cost_prior = (0.3, 1e-5)
    worker_memory = 2**29  # nvcc, cicc and ptxas at once on a TVM kernel
    workers_setting = "nvcc_workers"
    worker_noun = "nvcc run"
    keeps_intermediates = True
    comma_lists = True

    @classmethod
    def create(cls, toolkit: Toolkit, settings: BackendSettings) -> CompilerBackend:
        return cls(toolkit)

    @classmethod
    def version(cls, toolkit: Toolkit) -> str | None:
        return toolkit.nvcc_version

    @classmethod
    def path(cls, toolkit: Toolkit) -> str | None:
        return None if toolkit.nvcc is None else str(toolkit.nvcc)

    @classmethod
    def archs(cls, toolkit: Toolkit) -> tuple[int, ...]:
        return toolkit.nvcc_archs

    @classmethod
    def identity(cls, toolkit: Toolkit) -> tuple[str, tuple[Path, ...]]:
        includes = (toolkit.cuda_root / "include",) if toolkit.cuda_root is not None else ()
        return f"nvcc {toolkit.nvcc_version} {toolkit.nvcc}", includes

    @classmethod
    def check_job(cls, job: CompileJob) -> None:
        for option in job.options:  # first: what nvcc's shell would run
            _check_for_shell(option)
        super().check_job(job)

    @classmethod
    def check_prepared(cls, prepared: PreparedCompile, toolkit: Toolkit) -> None:
        super().check_prepared(prepared, toolkit)
        if not prepared.options or prepared.options[0] != str(toolkit.nvcc):
            raise ValueError(
                f"job {prepared.filename!r}: rendered for another nvcc than this server's "
                f"{toolkit.nvcc}"
            )

    def prepare(self, job: CompileJob, options: BackendOptions) -> PreparedCompile:
        nvcc = self.toolkit.nvcc
        if nvcc is None:
            raise ToolkitNotFound(
                "nvcc was not found; searched: "
                + "; ".join(self.toolkit.searched)
                + ". Set CUDA_PATH to a CUDA toolkit, put nvcc on PATH, or pip install "
                "nvidia-cuda-nvcc nvidia-cuda-crt nvidia-nvvm nvidia-cuda-runtime "
                "nvidia-cuda-cccl",
                searched=self.toolkit.searched,
                job=job,
            )
        output = job.output_format
        filename = f"{safe_stem(job.name)}.cu"
        argv = [str(nvcc)]
        if job.exact_options:
            argv += job.options
        else:
            argv += [f"--{output}", "-O3", *nvcc_arch_flags(options.arch, output)]
            if output != "ptx":
                argv.append("--ptxas-options=-v")  # the resource report, always
            argv += job.options
        argv = with_caller_folders(argv, job.source, options.cwd, lists=self.comma_lists)
        add_shared_options(argv, options)
        if options.keep_intermediates:
            # Kept in the job's own temp folder and moved to keep_dir afterwards: a dump
            # folder that cannot be written must not fail the compile.
            argv.append("--keep")
        stem = filename[: -len(".cu")]
        if not job.exact_options:
            # The headers it read outside the system's folders, for the cache (the
            # output is the same with or without: tested); all of them (-MD) when the
            # options name system folders of the user's (._named_files).
            report = "-MD" if reads_system_folders(job.options) else "-MMD"
            argv += [report, "-MF", f"{stem}.d"]
        argv += ["-o", f"{stem}.{output}", filename]
        return PreparedCompile(
            backend=self.name,
            output=output,
            arch=options.arch,
            source=job.source,
            filename=filename,
            options=tuple(argv),
            timeout=job.timeout,
        )
