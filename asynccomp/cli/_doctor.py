"""``asynccomp doctor``: what toolkit, compilers and GPU this machine has."""

from __future__ import annotations

import argparse
from typing import Any

from ..gpu import local_gpu_arch
from ..toolkit import find_toolkit


def add_parser(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "doctor", help="print the CUDA toolkit, NVRTC and GPU found"
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    print(find_toolkit().describe())
    print(f"local GPU:     {local_gpu_arch() or 'none found (give --arch / arch=)'}")
    return 0
