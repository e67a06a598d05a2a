"""``--ray ADDRESS`` and its companions, for the commands that take them (``compile``,
``serve``)."""

from __future__ import annotations

import argparse

from ..ray import RayExecutor
from ._args import jobs_text, positive_float, positive_int

__all__ = ("add_ray_timeout", "ray_address", "ray_executor")


def ray_address(text: str) -> str:
    """``--ray``'s value: a non-empty address."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected auto, HOST:PORT or ray://HOST:PORT, not ''")
    return text


def add_ray_timeout(p: argparse.ArgumentParser) -> None:
    """``--ray-actors`` and ``--ray-timeout``, for the commands that take ``--ray``."""
    p.add_argument(
        "--ray-actors",
        type=positive_int,
        default=None,
        metavar="N",
        help="with --ray: how many compile actors to start (default: one per CPU the "
        "cluster has free)",
    )
    p.add_argument(
        "--ray-timeout",
        type=positive_float,
        default=None,
        metavar="SECONDS",
        help="with --ray: give up joining the cluster, and again starting its actors, "
        f"after this long (default {RayExecutor.startup_timeout:g})",
    )


def ray_executor(args: argparse.Namespace) -> RayExecutor | None:
    """The executor ``--ray ADDRESS`` (``--ray-fallback``, ``--ray-actors``,
    ``--ray-timeout``) ask for."""
    companions = (
        ("--ray-fallback", args.ray_fallback),
        ("--ray-actors", args.ray_actors),
        ("--ray-timeout", args.ray_timeout),
    )
    for flag, value in companions:
        if value not in (None, False) and args.ray is None:
            raise ValueError(f"{flag} goes with --ray ADDRESS")
    if args.ray is None:
        return None
    if args.jobs is not None and not args.ray_fallback:
        actors = args.jobs if isinstance(args.jobs, int) else "N"
        raise ValueError(
            f"-j {jobs_text(args.jobs)} counts local workers, and --ray compiles on the "
            f"cluster's actors: --ray-actors {actors} sets how many (with --ray-fallback, -j "
            "is for the local workers it falls back to)"
        )
    timeout = RayExecutor.startup_timeout if args.ray_timeout is None else args.ray_timeout
    return RayExecutor(
        address=args.ray,
        actors=args.ray_actors,
        fallback=args.ray_fallback,
        startup_timeout=timeout,
    )
