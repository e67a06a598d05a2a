"""A benchmark's trial in a fresh Python process: what a user's first run pays (imports,
engine start, workers) is paid again in each."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from asynccomp._os import child_environ

__all__ = ("fresh_trial",)


def fresh_trial(module: str, args: Sequence[str]) -> dict[str, Any] | None:
    """``python -m MODULE ARGS`` in a fresh interpreter of this checkout: the JSON object
    its last line prints; ``None`` when it failed (its stderr shown here)."""
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        env=child_environ(),
        check=False,
    )
    if done.returncode != 0:
        print(done.stderr, file=sys.stderr)
        return None
    trial: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return trial
