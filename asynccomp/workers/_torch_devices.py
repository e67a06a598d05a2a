"""A template's answer to torch's device count, so that its imports start no CUDA thread.

A template may fork only while it is one thread. TileLang's import asks
``torch.cuda.is_available()`` (``tilelang/utils/device.py``), and so does tvm-ffi's
whenever torch is installed (``tvm_ffi/_optional_torch_c_dlpack.py``), TVM's and TileLang's
alike. With ``PYTORCH_NVML_BASED_CUDA_CHECK=1`` (which every template gets) torch counts
the devices through NVML instead of initializing CUDA, yet on the H100 both templates
still had a CUDA driver thread (``cuda00001800007``) after their initializers, and NVML's
init is known to start CUDA's driver (vllm-project/vllm#32611): no fork was safe, so every
worker was a fresh interpreter paying TileLang's or TVM's imports again.

So while a template's initializers run, its answer is torch's: as ``torch.cuda`` is
imported, its ``_cached_device_count`` (which ``device_count()`` and, under the NVML check,
``is_available()`` return when set) gets the number of device nodes the NVIDIA driver
made (``/dev/nvidia0``, ``/dev/nvidia1``, ...), where there are any: one per GPU the
driver has set up, which is what NVML counts where the driver works. Nothing in the
initializers then calls NVML or the driver. Afterwards the count is unset again (torch
itself caches it only once CUDA is initialized, since ``CUDA_VISIBLE_DEVICES`` may change
before), so the template's workers count for themselves, after the fork, where that is
safe; what the initializers computed from it (TileLang's ``IS_CUDA``) they keep.

Left to torch: a ``CUDA_VISIBLE_DEVICES`` (torch parses it, MIG and UUIDs included), a
``PYTORCH_NVML_BASED_CUDA_CHECK`` other than ``1`` (the user asked for the runtime's
count), a machine without NVIDIA device nodes (ROCm's torch counts with amdsmi), a torch
imported before, a torch without ``_cached_device_count``, and any process but a template.
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


def _torch_may_count() -> bool:
    """Whether the user (or an initializer) chose how torch counts: then torch does."""
    return (
        "CUDA_VISIBLE_DEVICES" in os.environ
        or os.environ.get("PYTORCH_NVML_BASED_CUDA_CHECK") != "1"
    )


class _Answer(importlib.abc.MetaPathFinder):
    """Finds ``torch.cuda`` with the finders after it, and sets its cached device count
    once the module has run (once: the template takes it out after its initializers)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.done = False
        self.module: ModuleType | None = None

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != "torch.cuda" or self.done:
            return None
        self.done = True
        spec = None
        for finder in sys.meta_path[sys.meta_path.index(self) + 1 :]:
            find = getattr(finder, "find_spec", None)
            spec = find(fullname, path, target) if find is not None else None
            if spec is not None:
                break
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module
        own = "exec_module" in getattr(loader, "__dict__", {})

        def exec_module(module: ModuleType) -> None:
            try:
                run(module)
            finally:  # the loader's own again (a reload, a loader shared by modules)
                if own:
                    loader.exec_module = run
                else:
                    del loader.exec_module
            hip = getattr(sys.modules.get("torch.version"), "hip", None)
            unset = getattr(module, "_cached_device_count", 0) is None
            if hip is None and unset and not _torch_may_count():
                module._cached_device_count = self.count  # type: ignore[attr-defined]
                self.module = module

        loader.exec_module = exec_module
        return spec

    def unset(self) -> None:
        """The count unset again, unless CUDA was initialized meanwhile (then torch
        itself would have cached it)."""
        module = self.module
        if (
            module is not None
            and not getattr(module, "_initialized", False)
            and getattr(module, "_cached_device_count", None) == self.count
        ):
            module._cached_device_count = None  # type: ignore[attr-defined]


@contextlib.contextmanager
def answer_device_count(folder: Path = Path("/dev")) -> Iterator[bool]:
    """Around a template's initializers: answer torch's device count (see the module's
    doc) where it applies, saying whether it may; afterwards torch counts again."""
    count = 0 if "torch.cuda" in sys.modules or _torch_may_count() else device_nodes(folder)
    if count == 0:
        yield False
        return
    finder = _Answer(count)
    sys.meta_path.insert(0, finder)
    try:
        yield True
    finally:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(finder)
        finder.unset()
