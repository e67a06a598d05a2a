"""The timing scripts' switch for NVRTC's own cache (``~/.nv``, on GPU machines): off
(``CUDA_CACHE_DISABLE=1`` for this process and every process it starts) unless
``--nvrtc-cache``, as in ``asynccomp bench`` (see :mod:`asynccomp.bench._nvrtc_cache`:
it answers a source that differs from one it compiled only by a comment, so the "warm"
passes of a script that repeats its kernels would time its hits)."""

from __future__ import annotations

import argparse
import os

from asynccomp.bench._nvrtc_cache import SWITCH

__all__ = ("add_nvrtc_cache_argument", "apply_nvrtc_cache")


def add_nvrtc_cache_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--nvrtc-cache",
        action="store_true",
        help="leave NVRTC's own cache on (default: off, so that every compile compiles)",
    )


def apply_nvrtc_cache(args: argparse.Namespace) -> None:
    """Before anything compiles or starts a worker."""
    if not args.nvrtc_cache:
        os.environ[SWITCH] = "1"
