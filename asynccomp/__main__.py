"""``python -m asynccomp``: the same as the ``asynccomp`` command."""

from __future__ import annotations

import sys

from .cli import main

# Guarded: anything that imports this module (multiprocessing's spawn re-imports a
# program's __main__) must not start a second copy of the command.
if __name__ == "__main__":
    sys.exit(main())
