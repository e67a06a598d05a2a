"""``--ray ADDRESS`` and its companions, for the commands that take them (``compile``,
``serve``)."""

from __future__ import annotations

import argparse

from ..ray import RayExecutor
from ._args import positive_float

__all__ = ("add_ray_timeout", "ray_executor")


def add_ray_timeout(p: argparse.ArgumentParser) -> None:
    """``--ray-timeout``, for the commands that take ``--ray``."""
    p.add_argument(
        "--ray-timeout",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help="with --ray: give up joining the cluster, and again starting its actors, "
        f"after this long (default {RayExecutor.startup_timeout:g})",
    )


def ray_executor(args: argparse.Namespace) -> RayExecutor | None:
    """The executor ``--ray ADDRESS`` (``--ray-fallback``, ``--ray-timeout``) ask for."""
    for flag, value in (("--ray-fallback", args.ray_fallback), ("--ray-timeout", args.ray_timeout)):
        if value not in (None, False) and args.ray is None:
            raise ValueError(f"{flag} goes with --ray ADDRESS")
    if args.ray is None:
        return None
    timeout = RayExecutor.startup_timeout if args.ray_timeout is None else args.ray_timeout
    return RayExecutor(address=args.ray, fallback=args.ray_fallback, startup_timeout=timeout)
