"""The disk cache's size bound, as ccache's ``max_size``: from the caller, the
environment or the folder's own setting.

Precedence: ``Engine(disk_cache_bytes=...)`` (or ``asynccomp serve``'s engine's), else
``$ASYNCCOMP_CACHE_MAX_SIZE``, else what ``asynccomp cache --max-size`` stored in the
cache folder (``settings.json``, as ``ccache -M`` writes ``ccache.conf``), else 4 GiB.
Sizes are written as ccache writes them: ``5G`` or ``5GB`` (5 x 10^9 bytes), ``5Gi`` or
``5GiB`` (5 x 2^30), ``500M``, ``800K``, or bytes; K, M, G, T are powers of 1000, Ki,
Mi, Gi, Ti powers of 1024. :func:`format_size` shows a size back in the same units: a
whole number of binary units (the 4 GiB default, ``-M 5GiB``) in binary ones, any other
size in decimal ones, one decimal place, as ccache shows ``5.0 GB``. ``0``, from any of
the three, means no limit, as ccache's ``-M 0`` does (a cache that keeps nothing on disk
is ``Engine(cache_dir=False)``): :func:`disk_bound` turns it into the bound a
:class:`~asynccomp.cache.DiskCache` takes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path

from .._perms import umask_of, write_new
from ..errors import InvalidJob

__all__ = (
    "DEFAULT_MAX_SIZE",
    "MAX_SIZE_ENV",
    "NO_LIMIT",
    "disk_bound",
    "SETTINGS_FILE",
    "format_size",
    "is_binary_size",
    "max_size",
    "parse_size",
    "store_max_size",
)

#: The environment variable that sets the disk cache's size bound.
MAX_SIZE_ENV = "ASYNCCOMP_CACHE_MAX_SIZE"
#: The bound when nothing sets one.
DEFAULT_MAX_SIZE = 4 * 2**30
#: The bound of a disk cache whose size setting is 0 ("no limit", as ccache's ``-M 0``).
NO_LIMIT = 2**63 - 1
#: The cache folder's settings file.
SETTINGS_FILE = "settings.json"

_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]?)(i?)B?", re.IGNORECASE)
_POWERS = {"": 0, "K": 1, "M": 2, "G": 3, "T": 4}


def parse_size(text: str, what: str = "size") -> int:
    """Bytes of a size such as ``5G``, ``512MiB`` or ``1000000``; :class:`InvalidJob`
    naming ``what`` for anything else."""
    found = _SIZE.fullmatch(text.strip())
    if found is None:
        raise InvalidJob(what, text, "expected a size such as 5G, 512MiB or 1000000 (bytes)")
    number, unit, binary = found.groups()
    base = 1024 if binary else 1000
    return int(float(number) * base ** _POWERS[unit.upper()])


def is_binary_size(size: int) -> bool:
    """Whether ``size`` reads best in binary units: a whole number of KiB that is not a
    whole number of KB (``5GiB``, ``512MiB``; not ``5G``, ``500M``)."""
    return size > 0 and size % 1024 == 0 and size % 1000 != 0


def format_size(size: int, binary: bool | None = None) -> str:
    """``size`` bytes for people, in the units :func:`parse_size` reads: ``5.0 GB`` for
    ``5G``, ``4.0 GiB`` for ``4GiB``, ``512 B`` under a kilobyte. ``binary`` picks the
    units (default: :func:`is_binary_size`), so that two sizes side by side can share
    them."""
    binary = is_binary_size(size) if binary is None else binary
    base, suffix = (1024, "iB") if binary else (1000, "B")
    power = 0
    while power < len(_POWERS) - 1 and size >= base ** (power + 1):
        power += 1
    if power == 0:
        return f"{size} B"
    unit = "KMGT"[power - 1]
    return f"{size / base**power:.1f} {unit}{suffix}"


def _stored(root: Path) -> int | None:
    try:
        value = json.loads((root / SETTINGS_FILE).read_text()).get("max_size")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def max_size(root: Path | None, given: int | None) -> tuple[int, str]:
    """Blocking (it may read the folder's settings): the disk cache's size setting in
    bytes (``0``: no limit), and where it came from (for ``asynccomp cache stats``).
    A bad ``$ASYNCCOMP_CACHE_MAX_SIZE`` is :class:`~asynccomp.InvalidJob` naming it."""
    if given is not None:
        return given, "set by the caller"
    env = os.environ.get(MAX_SIZE_ENV, "").strip()
    if env:
        return parse_size(env, MAX_SIZE_ENV), f"${MAX_SIZE_ENV}"
    stored = None if root is None else _stored(root)
    if stored is not None:
        return stored, f"{SETTINGS_FILE} in the cache folder"
    return DEFAULT_MAX_SIZE, "the default"


def disk_bound(setting: int) -> int:
    """The bound a :class:`~asynccomp.cache.DiskCache` takes for a size setting:
    ``0`` (no limit) is :data:`NO_LIMIT`."""
    return setting if setting > 0 else NO_LIMIT


def store_max_size(root: Path, size: int) -> None:
    """Keep ``size`` as the folder's bound (replaced at once: readers see one or the
    other)."""
    path = root / SETTINGS_FILE
    settings: dict[str, object] = {}
    with contextlib.suppress(OSError, ValueError):
        loaded = json.loads(path.read_text())
        if isinstance(loaded, dict):
            settings = loaded
    settings["max_size"] = size
    tmp = root / f".{SETTINGS_FILE}.{os.getpid()}.tmp"
    write_new(tmp, (json.dumps(settings, indent=2) + "\n").encode(), umask_of(None))
    tmp.replace(path)
