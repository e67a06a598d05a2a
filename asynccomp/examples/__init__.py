"""Built-in example kernels: CUDA sources TVM 0.27 generated for small operators
(vector add, softmax, reduction, tiled matmul, transpose, fp16 GELU), shipped so that
``asynccomp compile --examples`` works on any machine, GPU or not.

>>> from asynccomp.examples import example_names
>>> "vector_add" in example_names()
True
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ("EXAMPLES_DIR", "example_names", "example_path", "example_sources")

EXAMPLES_DIR = Path(str(resources.files(__name__)))


def example_names() -> list[str]:
    """The examples' names (file stems), sorted."""
    return sorted(p.stem for p in EXAMPLES_DIR.glob("*.cu"))


def example_path(name: str) -> Path:
    """The ``.cu`` file of one example; ``KeyError`` for an unknown name."""
    path = EXAMPLES_DIR / f"{name}.cu"
    if not path.is_file():
        raise KeyError(f"no example named {name!r}; have: {', '.join(example_names())}")
    return path


def example_sources() -> list[tuple[str, str]]:
    """``(name, source)`` for every example, sorted by name."""
    return [(name, example_path(name).read_text()) for name in example_names()]
