"""Real file-system faults for the tests."""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ("full_disk", "few_inodes")


@contextlib.contextmanager
def _tmpfs(tmp_path: Path, options: str) -> Iterator[Path]:
    """A real tmpfs mounted with ``options`` (needs root: skips otherwise)."""
    mount = Path(tempfile.mkdtemp(prefix="fs-", dir=tmp_path))
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@contextlib.contextmanager
def few_inodes(tmp_path: Path, inodes: int) -> Iterator[Path]:
    """A real file system with 64 MiB free but room for only ``inodes`` files and
    folders (its root counts): creating one more fails with ENOSPC."""
    with _tmpfs(tmp_path, f"size=64m,nr_inodes={inodes}") as mount:
        yield mount


@contextlib.contextmanager
def full_disk(tmp_path: Path, leave: int = 0) -> Iterator[Path]:
    """A real, full file system: a 64 KiB tmpfs filled to the last byte (needs root).

    ``leave`` bytes are held by a file named ``room``, which the test can delete to
    make that much space."""
    with _tmpfs(tmp_path, "size=64k") as mount:
        if leave:
            (mount / "room").write_bytes(b"\0" * leave)
        with contextlib.suppress(OSError), open(mount / "filler", "wb") as f:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
        yield mount
