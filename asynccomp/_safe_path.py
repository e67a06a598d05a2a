"""``python -m asynccomp`` imports as ``python -P -m asynccomp`` does.

``python -m`` puts the working folder first on ``sys.path``, so a ``ray.py`` (or an
``anyio.py``) lying there would be imported in place of the real module, and run; the
``asynccomp`` console script has no such entry. While Python looks for the module to
run (``sys.argv[0]`` is then ``"-m"``) it imports this package first, whose first
import is this module: the entry goes then, before anything else is imported. A program
that merely imports asynccomp keeps its ``sys.path`` as it is.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ("drop_working_folder",)


def _run_module() -> str | None:
    """The module ``python -m`` is running, from the interpreter's own command line."""
    argv = [str(arg) for arg in getattr(sys, "orig_argv", ())]
    for i, arg in enumerate(argv[1:], start=1):
        if arg == "-m":
            return argv[i + 1] if i + 1 < len(argv) else None
        if arg.startswith("-m"):
            return arg[2:]
        if arg in ("-c", "--") or not arg.startswith("-"):
            return None  # a command, or a script: not -m
    return None


def drop_working_folder() -> None:
    """Remove the working folder from the front of ``sys.path`` when this process is
    ``python -m asynccomp`` (or one of its modules), as ``python -P`` would."""
    if getattr(sys.flags, "safe_path", False):  # python -P (3.11+): done already
        return
    if sys.argv[:1] != ["-m"]:
        return
    module = _run_module()
    if module is None or not (module == "asynccomp" or module.startswith("asynccomp.")):
        return
    if sys.path and sys.path[0] in ("", str(Path.cwd())):
        del sys.path[0]


drop_working_folder()
