"""SASS of a compiled binary (``cuobjdump -sass``), for tests that compare code, not bytes.

cuobjdump comes from the ``nvidia-cuda-cuobjdump`` wheel (the test extra), found through
``cuda-pathfinder``; tests skip when it is missing.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path


@functools.cache
def cuobjdump() -> str | None:
    """The cuobjdump executable, or ``None`` when it is not installed."""
    try:
        from cuda import pathfinder

        found = pathfinder.find_nvidia_binary_utility("cuobjdump")
    except Exception:  # pathfinder missing or failing: treat as not found
        found = None
    return str(found) if found else None


def sass(binary: bytes, tool: str, tmp_path: Path, suffix: str = "cubin") -> str:
    """``cuobjdump -sass`` of a cubin (or fatbin), with the lines naming the file masked."""
    path = tmp_path / f"kernel.{suffix}"
    path.write_bytes(binary)
    out = subprocess.run([tool, "-sass", str(path)], capture_output=True, text=True, check=True)
    return "\n".join("<file>" if path.name in line else line for line in out.stdout.splitlines())
