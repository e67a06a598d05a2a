"""Which architecture a TVM-style compile is for, decided as TVM 0.27 decides it.

Order: the ``arch`` argument; else the two-argument callback's target, or the active
``tvm.target.Target.current()`` scope (looked at only when TVM is already imported, so
code that never imports TVM never pays for it); else ``$ASYNCCOMP_ARCH``; else the local
GPU; else TVM's ``ValueError``. The source matters for nvcc: TVM passes a given arch as
``-arch X`` and a looked-up one as ``-gencode arch=compute_N,code=sm_N``.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidJob
from ..gpu import local_gpu_arch
from ..job import parse_arch

__all__ = (
    "ARCH_ENV",
    "NO_ARCH_MESSAGE",
    "ResolvedArch",
    "arch_of_callback_target",
    "arch_of_target",
    "current_target_arch",
    "resolve_arch",
)

#: Chooses the architecture when no ``arch`` was given and no TVM target scope is active.
ARCH_ENV = "ASYNCCOMP_ARCH"

#: TVM's own message (its two sentences run together, as in TVM), and a hint of ours.
NO_ARCH_MESSAGE = (
    "No CUDA architecture was specified or GPU detected."
    "Try specifying it by adding '-arch=sm_xx' to your target."
    f" (asynccomp: or pass arch='sm_90a', or set {ARCH_ENV}=sm_90a)"
)


@dataclass(frozen=True)
class ResolvedArch:
    """The architecture a compile is for, and where it came from.

    ``arch`` is ``sm_90a`` style (a ``compute_`` spelling only when given that way);
    ``explicit`` is True when the caller passed it, which changes nvcc's flags exactly as
    in TVM (``-arch X`` for a given one, ``-gencode arch=compute_N,code=sm_N`` otherwise).
    ``nvcc_flags`` holds a caller's list of nvcc flags (TVM's list form), verbatim.
    """

    arch: str
    explicit: bool
    nvcc_flags: tuple[str, ...] = ()

    def nvcc_arch_flags(self) -> list[str]:
        if self.nvcc_flags:
            return list(self.nvcc_flags)
        if self.explicit:
            return ["-arch", self.arch]
        number = self.arch.split("_", 1)[1]
        return ["-gencode", f"arch=compute_{number},code=sm_{number}"]


_ARCH_IN_TEXT = re.compile(r"\b(?:sm|compute)_(\d{2,3}[af]?)\b")


def arch_of_target(target: Any) -> str | None:
    """``sm_90a`` for a TVM target whose ``arch`` is ``sm_90a`` (TVM's result for any
    ``sm_``/``compute_`` spelling); ``None`` for a target without one (e.g. ``llvm``)."""
    attrs = getattr(target, "attrs", None)
    value = attrs.get("arch", None) if attrs is not None else getattr(target, "arch", None)
    if not value:
        return None
    text = str(value)
    tail = text.split("_", 1)[1] if "_" in text else ""
    if len(tail) < 2:
        raise ValueError(f"The arch is not expected {text}")  # TVM's message
    arch = f"sm_{tail}"
    _check_arch(arch, f"the target's arch {text!r}")
    return arch


def arch_of_callback_target(target: object) -> str | None:
    """The architecture named by the second argument of the two-argument callback form:
    a TVM ``Target``, an arch string (``"sm_90a"``), or a target string that names one
    (``"cuda -arch=sm_90a"``, a JSON target, or a TVM tag when TVM is imported)."""
    if target is None:
        return None
    if not isinstance(target, str):
        return arch_of_target(target)
    match = _ARCH_IN_TEXT.search(target)
    if match:
        return f"sm_{match.group(1)}"
    tvm = sys.modules.get("tvm")
    if tvm is not None and target.strip():
        return arch_of_target(tvm.target.Target(target))
    raise ValueError(
        f"cannot read a CUDA architecture from target {target!r}: pass a tvm Target, "
        "or a string naming the architecture such as 'sm_90a'"
    )


def current_target_arch() -> str | None:
    """The arch of ``tvm.target.Target.current()``, when TVM is already imported.

    TVM is never imported here: a process that has not imported it has no target scope.
    """
    tvm = sys.modules.get("tvm")
    target_module = getattr(tvm, "target", None) if tvm is not None else None
    if target_module is None:  # TVM absent, or still being imported
        return None
    try:
        target = target_module.Target.current(allow_none=True)
    except AttributeError:
        # A runtime-only TVM (TVM_USE_RUNTIME_LIB=1, or a deployment that ships only
        # TVM's runtime) has no target machinery (no TargetCurrent), so no target scope:
        # the architecture comes from $ASYNCCOMP_ARCH or the GPU, as with no TVM at all.
        return None
    return None if target is None else arch_of_target(target)


def _check_arch(arch: str, what: str) -> None:
    try:
        parse_arch(arch)
    except InvalidJob:
        raise ValueError(
            f"{what} is not a CUDA architecture: expected e.g. 'sm_90a' or 'sm_80'"
        ) from None


def resolve_arch(arch: str | Sequence[str] | None, target: object = None) -> ResolvedArch:
    """Pick the architecture: ``arch``; else ``target`` (the callback's second argument)
    or the active TVM target scope; else ``$ASYNCCOMP_ARCH``; else the local GPU (``sm_90a``
    style, ``a`` added for majors of 9 and above, as TVM does); else TVM's ``ValueError``.

    Unlike TVM, nothing is looked up when ``arch`` is given.
    """
    if isinstance(arch, str):
        _check_arch(arch, f"arch {arch!r}")
        return ResolvedArch(arch, explicit=True)
    if arch is not None:
        flags = tuple(arch)
        if not flags or not all(isinstance(f, str) for f in flags):
            raise ValueError(f"arch must be a str or a list of nvcc flags (str), got {arch!r}")
        match = _ARCH_IN_TEXT.search(" ".join(flags))
        label = f"sm_{match.group(1)}" if match else local_gpu_arch()
        if label is None:
            raise ValueError(f"cannot tell which architecture nvcc flags {flags!r} are for")
        return ResolvedArch(label, explicit=True, nvcc_flags=flags)
    found = arch_of_callback_target(target) or current_target_arch()
    if found is None:
        env = os.environ.get(ARCH_ENV, "").strip()
        if env:
            _check_arch(env, f"{ARCH_ENV}={env!r}")
            found = env
    if found is None:
        found = local_gpu_arch()
    if found is None:
        raise ValueError(NO_ARCH_MESSAGE)
    return ResolvedArch(found, explicit=False)
