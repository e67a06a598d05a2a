"""``asynccomp cache``: what the compile cache holds and did (as ``ccache -s``), and its
upkeep (``clear``, ``verify``, ``path``)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from ..cache import (
    CACHE_FORMAT_VERSION,
    REMOTE_CACHE_ENV,
    REMOTE_CACHE_KEY_ENV,
    CacheStats,
    DiskCache,
    RedisCache,
    RemoteCache,
    default_cache_dir,
    remote_cache_from_url,
)
from ..cache._remote import redacted_url
from ..cache._settings import (
    MAX_SIZE_ENV,
    format_size,
    is_binary_size,
    max_size,
    parse_size,
    store_max_size,
)
from ..cache._stats import stats_lock
from ..errors import AsyncCompError
from ._args import add_umask

DESCRIPTION = """\
The compile cache: entries by a key over everything that decides a binary, in a folder
shared by every process (--cache-dir, else $ASYNCCOMP_CACHE_DIR, else the user cache
folder), and optionally a remote tier ($ASYNCCOMP_REMOTE_CACHE=redis://host:6379/0, with
the team's key in $ASYNCCOMP_REMOTE_CACHE_KEY or $ASYNCCOMP_REMOTE_CACHE_KEY_FILE).

  asynccomp cache stats      entries, bytes, hits and misses per tier, the folder
  asynccomp cache verify     read and check every entry, remove the bad ones
  asynccomp cache clear      remove every entry
  asynccomp cache path       print the folder
  asynccomp cache -z         zero the statistics (ccache -z, sccache --zero-stats)
  asynccomp cache -M 5G      keep at most 5 GB on disk (ccache -M; 0: no limit), stored in
                             the folder; $ASYNCCOMP_CACHE_MAX_SIZE overrides it, and
                             Engine(disk_cache_bytes=...) overrides both

Sizes, as ccache writes them: K, M, G, T are powers of 1000 (5G or 5GB: 5 x 10^9 bytes),
Ki, Mi, Gi, Ti powers of 1024 (5Gi or 5GiB: 5 x 2^30 bytes); stats shows a size in the
units it was given in (5.0 GB, 5.0 GiB; the default bound is 4.0 GiB).

The statistics are the folder's totals: every engine and compile server that caches
there adds its counts (a server when each client leaves and when it stops).
"""


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "cache",
        help="the compile cache: stats, verify, clear, path",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("action", nargs="?", choices=("stats", "verify", "clear", "path"))
    p.add_argument(
        "-z", "--zero-stats", action="store_true", help="zero the statistics (hits, misses...)"
    )
    p.add_argument(
        "-M",
        "--max-size",
        default=None,
        metavar="SIZE",
        help="keep at most SIZE on disk, stored in the cache folder: 5G = 5 x 10^9 bytes, "
        "5GiB = 5 x 2^30, 500M, bytes; 0: no limit",
    )
    p.add_argument("--cache-dir", type=Path, default=None, metavar="DIR", help="the folder")
    p.add_argument("--json", action="store_true", help="stats and verify: JSON on stdout")
    add_umask(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    root = args.cache_dir if args.cache_dir is not None else default_cache_dir()
    try:
        size = None if args.max_size is None else parse_size(args.max_size, "--max-size")
        max_size(None, None)  # a bad $ASYNCCOMP_CACHE_MAX_SIZE: one line, not a traceback
    except ValueError as exc:
        print(f"asynccomp: error: {exc}", file=sys.stderr)
        return 2
    if args.action is None and not args.zero_stats and size is None:
        args.action = "stats"
    if args.action == "path":
        print(root)
        return 0
    try:
        disk = DiskCache(root)
    except AsyncCompError as exc:
        print(f"asynccomp: error: {exc}", file=sys.stderr)
        return 1
    if args.zero_stats:
        CacheStats.zero(disk.root)
        print(f"statistics zeroed in {disk.directory}")
    if size is not None:
        store_max_size(disk.root, size)
        shown = f"{format_size(size)} ({size} bytes)" if size else "0: no limit"
        print(f"max size {shown} stored in {disk.directory}")
        if os.environ.get(MAX_SIZE_ENV, "").strip():
            print(f"asynccomp: warning: ${MAX_SIZE_ENV} is set and overrides it", file=sys.stderr)
    if args.action is None:
        return 0
    if args.action == "clear":
        removed = disk.clear()
        (root / "stats.json").unlink(missing_ok=True)
        print(f"removed {removed} entries from {disk.directory}")
        return 0
    if args.action == "verify":
        good, bad = disk.verify()
        if args.json:
            print(json.dumps({"good": good, "removed": [[str(p), why] for p, why in bad]}))
        else:
            for path, why in bad:
                print(f"removed {path}: {why}")
            print(f"{good} entries good, {len(bad)} bad (removed) in {disk.directory}")
        return 1 if bad else 0
    return _stats(disk, root, args.json)


def _server_counts(root: Path) -> tuple[dict[str, int], int | None]:
    """What a running compile server that caches in ``root`` has counted and not saved
    yet (it adds its counts to the folder's totals as each client leaves and when it
    stops), and its pid."""
    from ..server import status

    try:
        found = status()
    except AsyncCompError:
        return {}, None
    settings = found.get("settings") or {}
    counts = found.get("cache_stats_unsaved")
    if not isinstance(counts, dict) or settings.get("cache_dir") != str(root):
        return {}, None
    pid = found.get("pid")
    return {k: v for k, v in counts.items() if isinstance(v, int)}, pid if isinstance(
        pid, int
    ) else None


async def _problem(store: RemoteCache) -> str | None:
    """Why the store cannot be used now (unreachable, a refused login...), or None."""
    try:
        return await store.probe() if isinstance(store, RedisCache) else None
    finally:
        await store.aclose()


def _remote_state() -> dict[str, Any] | None:
    """The remote tier the environment names: where (password hidden), whether it
    answers, and the id of its key (never the key)."""
    url = os.environ.get(REMOTE_CACHE_ENV, "").strip()
    if not url:
        return None
    shown = redacted_url(url)
    try:
        store = remote_cache_from_url(url)
    except AsyncCompError as exc:
        return {"url": shown, "error": str(exc)}
    problem = anyio.run(_problem, store)
    return {
        "url": shown,
        "reachable": problem is None or not problem.startswith("not reachable"),
        "problem": problem,
        "key_id": store.auth.key_id,
        "key_source": store.auth.source,
    }


def _stats(disk: DiskCache, root: Path, as_json: bool) -> int:
    entries, size = disk.count()
    with stats_lock(disk.root):
        # Under the lock a server saving its counts waits: what it has not saved is in
        # its status, what it has is in the file, never both or neither.
        totals = CacheStats.load(root)
        live, server_pid = _server_counts(disk.root.resolve())
    max_bytes, max_from = max_size(disk.root, None)
    for name, value in live.items():
        if name in totals:
            totals[name] += value
    remote = _remote_state()
    lookups = sum(totals[k] for k in ("memory_hits", "disk_hits", "remote_hits", "misses"))
    hits = lookups - totals["misses"]
    report = {
        "folder": str(disk.directory),
        "format": CACHE_FORMAT_VERSION,
        "entries": entries,
        "bytes": size,
        "max_bytes": max_bytes,
        "max_bytes_from": max_from,
        **totals,
        "hit_rate": round(hits / lookups, 4) if lookups else None,
        "remote": remote,
        "server": None if server_pid is None else {"pid": server_pid, "unsaved": live},
    }
    if as_json:
        print(json.dumps(report, indent=2))
        return 0
    rate = f"{100 * hits / lookups:.1f}%" if lookups else "-"
    bound = format_size(max_bytes) if max_bytes else "no limit"
    lines = [
        f"folder           {report['folder']}",
        f"entries          {entries}",
        f"size             {format_size(size, is_binary_size(max_bytes))} of {bound} ({max_from})",
        f"hits             {hits} of {lookups} lookups ({rate})",
        f"  memory         {totals['memory_hits']}",
        f"  disk           {totals['disk_hits']}",
        f"  remote         {totals['remote_hits']}",
        f"misses           {totals['misses']} ({totals['stale']} stale: a header changed; "
        f"{totals['forged']} forged: failed authentication)",
        f"stored           {totals['stores']}",
    ]
    if server_pid is not None:
        served = sum(live.get(k, 0) for k in ("memory_hits", "disk_hits", "remote_hits"))
        lines.append(
            f"server           pid {server_pid}: {served} of the hits (clients connected, "
            "not saved yet)"
        )
    if remote is None:
        lines.append(f"remote           none (set {REMOTE_CACHE_ENV}=redis://host:6379/0)")
    elif "error" in remote:
        lines.append(f"remote           {remote['url']} (NOT USED: {remote['error']})")
    else:
        state = "reachable, usable" if remote["problem"] is None else remote["problem"]
        lines.append(f"remote           {remote['url']} ({state})")
        lines.append(f"  key            id {remote['key_id']}, from {remote['key_source']}")
    if remote is None and os.environ.get(REMOTE_CACHE_KEY_ENV):
        lines.append(f"  ({REMOTE_CACHE_KEY_ENV} is set, but no remote tier is)")
    print("\n".join(lines))
    return 0
