"""The engine's dump roots: which folder a job's dump goes to, and writing it off the
event loop.

One :class:`~asynccomp.dumps.DumpRoot` per root folder per engine, made on first use
from worker threads under a lock: two roots for one folder would number their job
folders from the same sequence number.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import anyio.to_thread

from ..backends import PreparedCompile
from ..dumps import DumpRoot, default_dump_root
from ..job import CompileJob
from ..result import CompileResult

__all__ = ("DumpRegistry",)

logger = logging.getLogger("asynccomp")


class DumpRegistry:
    """The dump roots of one engine; ``engine_root`` is ``Engine(dump_dir=...)``,
    ``umask`` its ``umask`` (the modes of what the dumps write).

    ``compiled_in`` (set once the engine knows its backends) says, by backend name, the
    folder a compile runs in (``None``: not known here, as on a compile server); a
    dump's ``rerun.py`` compiles there, since line info names it."""

    def __init__(self, engine_root: Path | None, umask: int | None = None) -> None:
        self.engine_root = engine_root
        self.umask = umask
        self.compiled_in: Callable[[str], str | None] = lambda backend: None
        self._roots: dict[Path, DumpRoot] = {}
        self._lock = threading.Lock()

    def wants(self, job: CompileJob) -> bool:
        """Whether ``job`` is dumped."""
        return job.dump is not False or self.engine_root is not None

    def open_engine_root(self) -> None:
        """Blocking: make and check the engine's own root (an unusable one raises
        :class:`~asynccomp.DumpDirError` as the engine starts, before any job runs)."""
        if self.engine_root is not None:
            self._root(self.engine_root)

    def _root(self, path: Path) -> DumpRoot:
        with self._lock:
            root = self._roots.get(path)
            if root is None:
                root = self._roots[path] = DumpRoot(path, self.umask)
            return root

    def root_of(self, job: CompileJob) -> DumpRoot:
        """Blocking: the root ``job`` dumps into (its own wins over the engine's)."""
        return self._root(job.dump_root or self.engine_root or default_dump_root())

    def open_folder(self, job: CompileJob, prepared: PreparedCompile) -> Path:
        """Blocking: the job's new folder, with its source and command written (so a
        compile that hangs still leaves a reproduction). Raises ``OSError``."""
        root = self.root_of(job)
        folder = root.make_job_folder(job, prepared)
        root.write_inputs(folder, prepared, self.compiled_in(prepared.backend))
        return folder

    def interrupted(
        self,
        items: list[tuple[Path, CompileJob, PreparedCompile]],
        versions: dict[str, str | None],
    ) -> None:
        """Blocking: mark each folder's job interrupted (``result.json``, manifest line).
        A folder that cannot be written is left as it is: the run is stopping anyway."""
        for folder, job, prepared in items:
            try:
                self.root_of(job).write_interrupted(folder, job, prepared, versions)
            except OSError:
                logger.warning("asynccomp: could not mark dump %s interrupted", folder)

    async def finish(
        self,
        folder: Path,
        prepared: PreparedCompile,
        result: CompileResult,
        versions: dict[str, str | None],
    ) -> CompileResult:
        """Write the log, binary, ``result.json`` and the manifest line; the result
        comes back with its ``dump_dir`` (and a warning if the writing failed)."""
        result = replace(result, dump_dir=folder)

        def finish() -> None:
            self.root_of(result.job).write_outputs(folder, prepared, result, versions)

        try:
            await anyio.to_thread.run_sync(finish)
        except OSError as exc:
            result = replace(
                result, warnings=(*result.warnings, f"dump not completed in {folder}: {exc}")
            )
        return result
