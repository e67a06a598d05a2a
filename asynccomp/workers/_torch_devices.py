"""A template's answer to torch's device count, so that its imports start no CUDA thread.

A template may fork only while it is one thread. TileLang's import asks
``torch.cuda.is_available()`` (``tilelang/utils/device.py``), and so does tvm-ffi's
whenever torch is installed (``tvm_ffi/_optional_torch_c_dlpack.py``), TVM's and TileLang's
alike. With ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` (which every template gets) torch counts
the devices through NVML instead of initializing CUDA, yet on the H100 both templates
still had a CUDA driver thread (``cuda00001800007``) after their initializers, and NVML's
init is known to start CUDA's driver (vllm-project/vllm#32611): no fork was safe, so every
worker was a fresh interpreter paying TileLang's or TVM's imports again.

So a template answers the count itself, before its initializers run: as ``torch.cuda``
is imported, its ``_cached_device_count`` (which ``device_count()`` and, under the NVML
check, ``is_available()`` return when set) gets the number of device nodes the NVIDIA
driver made (``/dev/nvidia0``, ``/dev/nvidia1``, ...): what NVML would count, and 0 on a
machine without them. Nothing in the template then calls NVML or the driver. Its workers
inherit the answer and initialize CUDA themselves if they use it (after the fork, where
that is safe).

Left to torch: a ``CUDA_VISIBLE_DEVICES`` (torch parses it, MIG and UUIDs included), a
``PYTORCH_NVML_BASED_CUDA_CHECK`` other than ``1`` (the user asked for the runtime's
count), a torch without ``_cached_device_count``, and any process but a template.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import os
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType

__all__ = ("answer_device_count", "device_nodes")

_NODE = re.compile(r"nvidia(\d+)")


def device_nodes(folder: Path = Path("/dev")) -> int:
    """How many GPUs the NVIDIA driver made device nodes for (``nvidia0``, ...)."""
    try:
        return sum(1 for entry in folder.iterdir() if _NODE.fullmatch(entry.name))
    except OSError:
        return 0


class _Answer(importlib.abc.MetaPathFinder):
    """Finds ``torch.cuda`` as the other finders would, and sets its cached device count
    once the module has run (once: the template takes it out after its initializers)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.done = False

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "torch.cuda" or self.done:
            return None
        self.done = True
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module
        count = self.count

        def exec_module(module: ModuleType) -> None:
            run(module)
            if getattr(module, "_cached_device_count", 0) is None:
                module._cached_device_count = count  # type: ignore[attr-defined]

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


@contextlib.contextmanager
def answer_device_count(folder: Path = Path("/dev")) -> Iterator[bool]:
    """Around a template's initializers: answer torch's device count (see the module's
    doc) where it applies, saying whether it does; afterwards the imports of the
    template's workers are their own again."""
    if (
        "torch.cuda" in sys.modules
        or "CUDA_VISIBLE_DEVICES" in os.environ
        or os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK") != "1"
    ):
        yield False
        return
    finder = _Answer(device_nodes(folder))
    sys.meta_path.insert(0, finder)
    try:
        yield True
    finally:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(finder)
