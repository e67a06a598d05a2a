"""asynccomp's benchmarks, one package: run each from the checkout's root as
``python -m benchmarks.<subject>.<script>`` (README.md in this folder says which script
measures what, and where its results are written up)."""

from __future__ import annotations

from pathlib import Path

#: The checkout's root (this folder's parent).
REPO = Path(__file__).resolve().parent.parent
