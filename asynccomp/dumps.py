"""Per-job dump folders: exactly what was compiled, how, and what came out.

Each dumped job gets a folder of its own, ``<root>/<sequence>-<name>-<key>/``, made
with an exclusive ``mkdir`` so that concurrent jobs (even of one name and one source,
even from several processes sharing a root) never share one. It holds:

- ``<name>.cu``: the exact source text the compiler received;
- ``command.txt``: NVRTC's option list (one per line) or nvcc's command line;
- ``compile.log``: the compiler's whole output;
- ``<name>.cubin`` / ``.fatbin`` / ``.ptx``: the binary, byte-identical to ``result.binary``;
- ``result.json``: job fields, status, error, timings, resources, toolkit versions;
- ``headers/``: the local headers the compile reads (outside the toolkit), copied at
  their absolute paths below it, so that the folder alone reproduces the compile;
- ``rerun.py`` for NVRTC and nvJitLink jobs: the same library call through
  ``cuda.bindings`` (``python3 rerun.py`` writes ``rerun/<binary>`` and says whether its
  bytes are the dumped binary's); ``rerun.sh`` for nvcc and ptx jobs, which re-runs the
  same command in that folder (and nvcc's ``--keep`` intermediates). Both use the
  original headers while they are unchanged, else the copies (see
  :mod:`asynccomp._dump_repro`).

The root also gets ``manifest.jsonl``, one JSON line per finished job, appended in a
single ``write`` so lines from concurrent jobs never interleave. A job whose run stops
first (Ctrl-C, a cancelled call) gets both too, with status ``interrupted``.

Writing a dump never costs a compile result: an I/O error becomes a warning on the
result, and the sweep goes on.

Everything a dump writes gets the mode the engine's umask says (:mod:`asynccomp._perms`:
by default private to the user, folders 0700 and files 0600; ``rerun.sh`` and
``rerun.py`` are also executable by those who may read them; the copies under
``headers/`` too): a dump holds whole sources.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import shlex
import threading
import time
from pathlib import Path
from typing import Any

from ._dump_repro import copy_local_headers, rerun_py, rerun_sh
from ._perms import folder_mode, make_folders, open_new, set_mode, umask_of, write_new
from .backends import PreparedCompile, backend_class
from .backends._base import safe_stem
from .errors import CompileTimeout, DumpDirError
from .job import CompileJob
from .result import CompileResult

__all__ = (
    "DumpRoot",
    "default_dump_root",
    "interrupted_record",
    "job_key",
    "result_record",
)

MANIFEST = "manifest.jsonl"
#: A dump's scripts: executable, unlike the other files.
_SCRIPTS = ("rerun.sh", "rerun.py")


def default_dump_root() -> Path:
    """Where ``CompileJob(dump=True)`` goes when the engine has no ``dump_dir``:
    ``$ASYNCCOMP_DUMP_DIR``, else ``./asynccomp-dumps``."""
    return Path(os.environ.get("ASYNCCOMP_DUMP_DIR") or "asynccomp-dumps").absolute()


def job_key(prepared: PreparedCompile) -> str:
    """A short digest of what was compiled (source and options), for folder names."""
    digest = hashlib.sha256()
    for part in (prepared.backend, prepared.arch, prepared.output, *prepared.options):
        digest.update(_bytes(part) + b"\x00")
    digest.update(_bytes(prepared.source))
    return digest.hexdigest()[:12]


class DumpRoot:
    """A folder that receives job dump folders. Checked when made: it must be writable.
    ``umask``: the modes of what it writes (``None``: ``$ASYNCCOMP_UMASK``, else private
    to the user; :mod:`asynccomp._perms`)."""

    def __init__(self, root: str | os.PathLike[str], umask: int | None = None) -> None:
        self.path = Path(root).absolute()
        self.umask = umask_of(umask)
        try:
            make_folders(self.path, self.umask)
            probe = self.path / f".probe-{os.getpid()}-{threading.get_ident()}"
            write_new(probe, b"", self.umask)
            probe.unlink()
        except OSError as exc:
            raise DumpDirError(f"dump folder {self.path} is not usable: {exc}") from exc
        self._sequence = itertools.count(_next_sequence(self.path))
        self._lock = threading.Lock()

    def make_job_folder(self, job: CompileJob, prepared: PreparedCompile) -> Path:
        """Create and return a fresh folder for one job (never one that exists)."""
        name = safe_stem(job.name, limit=40)
        key = job_key(prepared)
        while True:
            with self._lock:
                sequence = next(self._sequence)
            folder = self.path / f"{sequence:06d}-{name}-{key}"
            try:
                folder.mkdir(mode=0o700)
            except FileExistsError:  # another process sharing this root took it
                continue
            folder.chmod(folder_mode(self.umask))
            return folder

    def write_inputs(
        self, folder: Path, prepared: PreparedCompile, compiled_in: str | None = None
    ) -> None:
        """Source, command, the local headers and the rerun script: written before
        compiling, so a hang still leaves a reproduction. ``compiled_in``: the folder
        the compiler runs in, when known (``rerun.py`` compiles there too)."""
        write_new(folder / prepared.filename, _bytes(prepared.source), self.umask)
        copies = copy_local_headers(folder, prepared, self.umask)
        if backend_class(prepared.backend).runs_program:
            command = shlex.join(prepared.options) + "\n"
            self._write_script(folder / "rerun.sh", rerun_sh(prepared, copies, folder))
        else:
            command = "\n".join(prepared.options) + "\n"
            script = rerun_py(prepared, copies, folder, compiled_in)
            if script is not None:
                self._write_script(folder / "rerun.py", script)
        write_new(folder / "command.txt", _bytes(command), self.umask)

    def _write_script(self, path: Path, script: str) -> None:
        write_new(path, _bytes(script), self.umask)
        path.chmod(folder_mode(self.umask))  # executable by whoever may read it

    def write_outputs(
        self,
        folder: Path,
        prepared: PreparedCompile,
        result: CompileResult,
        versions: dict[str, str | None],
    ) -> None:
        """Log, binary, result.json, and the manifest line; the compiler's intermediates
        moved in get the folder's modes too."""
        write_new(folder / "compile.log", _bytes(result.log), self.umask)
        binary_name = None
        if result.binary is not None:
            binary_name = prepared.binary_name
            write_new(folder / binary_name, result.binary, self.umask)
        record = result_record(result, folder=folder, binary_name=binary_name, versions=versions)
        write_new(folder / "result.json", _bytes(json.dumps(record, indent=2) + "\n"), self.umask)
        self.append_manifest(record)
        with os.scandir(folder) as entries:  # nvcc's intermediates, made in its own folder
            for entry in entries:
                if entry.name not in _SCRIPTS:
                    set_mode(Path(entry.path), self.umask, folder=entry.is_dir())

    def write_interrupted(
        self,
        folder: Path,
        job: CompileJob,
        prepared: PreparedCompile,
        versions: dict[str, str | None],
    ) -> None:
        """``result.json`` and the manifest line of a job whose run stopped (Ctrl-C, a
        cancelled call) before it finished: status ``interrupted``, no binary."""
        record = interrupted_record(job, prepared, folder=folder, versions=versions)
        write_new(folder / "result.json", _bytes(json.dumps(record, indent=2) + "\n"), self.umask)
        self.append_manifest(record)

    def append_manifest(self, record: dict[str, Any]) -> None:
        keys = (
            "folder",
            "name",
            "backend",
            "status",
            "error_type",
            "elapsed",
            "queued",
            "cached",
            "binary_sha256",
            "finished_at",
        )
        line = json.dumps({k: record.get(k) for k in keys}) + "\n"
        fd = open_new(self.path / MANIFEST, os.O_WRONLY | os.O_APPEND, self.umask)
        try:
            os.write(fd, line.encode())  # one O_APPEND write: lines never interleave
        finally:
            os.close(fd)


def _bytes(text: str) -> bytes:
    # Text from files that are not UTF-8 keeps its bytes as lone surrogates
    # ("surrogateescape"): write those bytes back, as the compiler got them.
    return text.encode("utf-8", "surrogateescape")


def _next_sequence(root: Path) -> int:
    """Continue numbering after what the root already holds (a second run appends)."""
    highest = -1
    try:
        for entry in os.scandir(root):
            head = entry.name.split("-", 1)[0]
            if head.isdigit():
                highest = max(highest, int(head))
    except OSError:
        pass
    return highest + 1


def interrupted_record(
    job: CompileJob,
    prepared: PreparedCompile,
    *,
    folder: Path | None,
    versions: dict[str, str | None],
) -> dict[str, Any]:
    """The record of a job stopped before it finished (the same fields as
    :func:`result_record`; no times, no binary)."""
    return {
        "folder": str(folder) if folder else None,
        "name": job.name,
        "backend": job.backend,
        "output": prepared.output,
        "arch": prepared.arch,
        "options": list(job.options),
        "timeout": job.timeout,
        "status": "interrupted",
        "error_type": None,
        "error": "the run was interrupted before this job finished",
        "elapsed": None,
        "queued": None,
        "cached": False,
        "command": [],
        "binary": None,
        "binary_size": None,
        "binary_sha256": None,
        "resources": {},
        "toolkit": versions,
        "warnings": [],
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def result_record(
    result: CompileResult,
    *,
    folder: Path | None,
    binary_name: str | None,
    versions: dict[str, str | None],
) -> dict[str, Any]:
    """The machine-readable description of a result (``result.json``, the CLI's ``--json``)."""
    job = result.job
    if result.ok:
        status = "cached" if result.cached else "ok"
    else:
        status = "timeout" if isinstance(result.error, CompileTimeout) else "failed"
    return {
        "folder": str(folder) if folder else None,
        "name": job.name,
        "backend": job.backend,
        "output": result.output,
        "arch": result.arch,
        "options": list(job.options),
        "timeout": job.timeout,
        "status": status,
        "error_type": type(result.error).__name__ if result.error else None,
        "error": str(result.error) if result.error else None,
        "elapsed": round(result.elapsed, 6),
        "queued": round(result.queued, 6),
        "cached": result.cached,
        "command": list(result.command),
        "binary": binary_name,
        "binary_size": len(result.binary) if result.binary is not None else None,
        "binary_sha256": hashlib.sha256(result.binary).hexdigest() if result.binary else None,
        "resources": {name: r.to_dict() for name, r in result.resources.items()},
        "toolkit": versions,
        "warnings": list(result.warnings),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
