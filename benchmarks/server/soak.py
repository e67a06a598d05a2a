"""A fault soak: many jobs through the compile server while a chaos loop breaks things.

A private compile server (its own ``$ASYNCCOMP_SERVER_DIR``, disk cache and ``TMPDIR``)
with a private, password-protected ``redis-server`` as its remote tier (the team's key
in ``$ASYNCCOMP_REMOTE_CACHE_KEY``, as the manual's cache guide sets it up) serves K
client processes (``python -m benchmarks.server.soak client``: an ``Engine(server="auto")``
each, batches through ``as_completed``; :mod:`.soak_client`). Each job is drawn from a
deterministic mix (:func:`.soak_mix.job_spec`): cache hits (a few hot ``-DF=``
variants), misses (a source of their own), sources that fail to compile, and slow
sources with a short timeout, NVRTC and nvcc; PTX linked by nvJitLink in the server's
worker processes, and PTX that wedges nvJitLink (its own ``CompileError``, nothing
more); sources that pre-include a header (``-include``) the chaos rewrites; options
files (``-Xptxas=-optf=``, ``--options-file``), refused as the job is built. Meanwhile
a chaos thread, every ``--chaos-interval`` seconds, in turn:
SIGKILLs the server and starts it again with an empty disk cache (a fresh machine: its
hits come from Redis, or are compiled again), SIGKILLs an NVRTC worker, SIGKILLs nvcc
or a tool it runs (cicc, ptxas, gcc's cc1plus, ...), restarts Redis (SIGKILL; its
append-only file keeps what it held), SIGSTOPs a client for ``--stop-seconds``,
SIGKILLs a client, rewrites the pre-included header, has a client fork a child that
compiles through an engine of its own and exits (``sys.exit`` or ``os._exit``, in
turn). ``--chaos`` picks kinds (``--chaos ""``: none).

Accounting: each client appends one JSON line per job (``ok`` with the binary's
SHA-256, or the error's class name and message). A killed client's jobs without a line
are handed to a fresh client (``resubmitted``); a line it wrote stands. At the end:

- every job has exactly one line (none lost, none duplicated);
- every error is typed and fits the job: ``CompileError`` for the broken sources,
  ``CompileTimeout`` for the slow ones, and what chaos causes (``ServerLost``,
  ``WorkerCrashed``, ``ServerError`` for a whole call; for nvcc jobs ``InternalError``
  saying what was "killed by" a signal) for any job;
- every binary equals a reference compile of its source (in this process, no cache,
  once per distinct source); a header job's, the compile of the header version in
  effect while it ran (none stale);
- every forked child compiled its own job and exited, none hung or orphaned;
- server and client RSS flat after warm-up (growth after the first 30% of a process's
  samples, and a slope, reported; over ``--max-growth-mib`` is a violation);
- after the server is stopped: no process that carries this run's marker variable
  (server, workers, nvcc guards, redis, clients), nothing in the private ``TMPDIR``, no
  socket in the server folder or bound under the run's folder.

It prints a summary, writes ``--json``, and exits 1 on any violation::

    python -m benchmarks.server.soak --jobs 10000 --clients 2 --chaos-interval 4
    python -m benchmarks.server.soak --jobs 600000 --clients 3 --chaos-interval 10 --miss 0.01 \
        --json soak.json

The redis-server starter here duplicates a few lines of ``tests/redis_server.py`` (a
benchmark must not import the tests).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import random
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import psutil

from asynccomp import AsyncCompError, Engine
from asynccomp import server as compile_server
from asynccomp._os import python_path, rss, running
from asynccomp.server import ServerPaths, server_paths, start_server

from . import soak_client
from .soak_mix import (
    ARCH,
    EXPECTED,
    REFUSED_SAYS,
    WEDGE_SAYS,
    Mix,
    Spec,
    fork_spec,
    header_text,
    job_spec,
    text_hash,
)

MARKER = "ASYNCCOMP_SOAK_RUN"  # in the environment of everything the soak starts
#: The chaos kinds, in the order they take turns (the server's kill well after Redis's
#: restart: its successor's remote tier finds Redis up, with what it held).
CHAOS = (
    "server", "nvrtc_worker", "nvcc", "redis", "client_stop", "client_kill", "header", "fork",
)  # fmt: skip
#: What chaos may cause any job that reached the server, and the kind that causes it
#: (InternalError only when it says "killed by": a killed nvcc). With that kind left
#: out of --chaos, the error is a wrong outcome.
CHAOS_ERRORS = {"ServerLost": "server", "ServerError": "server", "WorkerCrashed": "nvrtc_worker"}
NVCC_TOOLS = ("nvcc", "cicc", "ptxas", "cc1plus", "fatbinary", "cudafe++")
#: Worker and template processes of asynccomp.workers (acw-<pool>, acz-<pool>).
WORKER_PREFIXES = ("acw-", "acz-")


# -- the driver: redis, server, clients, chaos ------------------------------------------


class Redis:
    """A private redis-server on a fixed port, with a password and an append-only file,
    restartable."""

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.password = secrets.token_hex(8)
        self.folder, self.env = folder, env
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock:
                sock.sendall(f"AUTH {self.password}\r\nPING\r\n".encode())
                reply = b""
                while b"PONG" not in reply and (chunk := sock.recv(100)):
                    reply += chunk
                return b"PONG" in reply
        except OSError:
            return False

    def start(self) -> None:
        argv = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1"]
        # An append-only file, as a team's Redis would keep one: a restart loses at
        # most the last second's entries, not all of them.
        argv += ["--save", "", "--appendonly", "yes", "--dir", str(self.folder)]
        argv += ["--requirepass", self.password]
        self.process = subprocess.Popen(
            argv, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + 30
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
        if self.process is not None:
            self.process.wait()


@dataclasses.dataclass
class Client:
    number: int
    process: subprocess.Popen[bytes]
    ids: list[int]
    out: Path
    killed: bool = False
    assigned: frozenset[int] = frozenset()


def _ours(marker: str) -> list[psutil.Process]:
    """Every process of this user that carries the run's marker variable."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.uids().real == os.getuid() and process.environ().get(MARKER) == marker:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            pass
    return found


def _rss(pid: int) -> int | None:
    return rss(pid) or None  # 0: gone, or a zombie


def memory_trend(samples: list[tuple[float, int]], warmup: float = 0.3) -> dict[str, Any]:
    """First, last and max RSS after warm-up (the first ``warmup`` of the samples), the
    growth between the means of the first and last quarter after it, and a slope."""
    after = samples[int(len(samples) * warmup) :]
    if len(after) < 8:
        return {"samples": len(samples), "judged": False}
    quarter = max(1, len(after) // 4)
    mib = 2.0**20
    growth = (
        sum(r for _, r in after[-quarter:]) / quarter - sum(r for _, r in after[:quarter]) / quarter
    )
    ts = [t for t, _ in after]
    rs = [r for _, r in after]
    mean_t, mean_r = sum(ts) / len(ts), sum(rs) / len(rs)
    var = sum((t - mean_t) ** 2 for t in ts) or 1.0
    slope = sum((t - mean_t) * (r - mean_r) for t, r in zip(ts, rs, strict=True)) / var
    return {
        "samples": len(samples),
        "judged": True,
        "seconds": round(ts[-1] - ts[0], 1),
        "first_mib": round(rs[0] / mib, 1),
        "last_mib": round(rs[-1] / mib, 1),
        "max_mib": round(max(rs) / mib, 1),
        "growth_mib": round(growth / mib, 1),
        "slope_mib_per_min": round(slope * 60 / mib, 2),
    }


class Soak:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.t0 = time.monotonic()
        self.marker = secrets.token_hex(6)
        # Short: the server's socket path must fit in 107 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="acsoak-", dir="/tmp"))
        self.tmp = self.root / "tmp"
        for folder in (self.tmp, self.root / "redis", self.root / "out", self.root / "hdr"):
            folder.mkdir(mode=0o700)
        # The header ``header`` jobs pre-include, rewritten by the chaos; the options
        # file ``refused`` jobs name (never read: refused as the job is built).
        self.header = self.root / "hdr" / "value.h"
        self.header_versions: list[tuple[str, int, float]] = []  # (hash, VALUE, when)
        self.write_header(1000)
        options_file = self.root / "hdr" / "ptxas.opts"
        options_file.write_text("-O3\n")
        self.mix = Mix(
            seed=args.seed,
            miss=args.miss,
            fail=args.fail,
            timeout=args.timeout,
            ptx=args.ptx,
            wedge=args.wedge,
            header=args.header,
            refused=args.refused,
            header_path=str(self.header),
            options_file=str(options_file),
        )
        self.env = {
            k: v for k, v in os.environ.items() if not k.startswith(("ASYNCCOMP_", "TMPDIR"))
        }
        self.env.update(
            {
                MARKER: self.marker,
                "TMPDIR": str(self.tmp),
                "ASYNCCOMP_SERVER_DIR": str(self.root / "s"),
                "ASYNCCOMP_CACHE_DIR": str(self.root / "cache"),
                "ASYNCCOMP_REMOTE_CACHE_KEY": secrets.token_hex(32),
                "PYTHONPATH": python_path(),
            }
        )
        self.redis = Redis(self.root / "redis", self.env)
        self.env["ASYNCCOMP_REMOTE_CACHE"] = self.redis.url
        self.paths: ServerPaths = server_paths(self.root / "s")
        self.clients: list[Client] = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.events: list[dict[str, Any]] = []
        self.rss: dict[str, list[tuple[float, int]]] = {}
        self.violations: list[str] = []
        self.resubmitted = 0
        self.cache_counts: Counter[str] = Counter()
        self.forks_asked = 0
        self.nvjitlink_workers: set[int] = set()  # the server's, seen
        self.clients_with_workers: set[int] = set()

    def write_header(self, value: int) -> None:
        """Replace the header at once (a new file renamed over it): a reader sees one
        version or the next, never a mix."""
        text = header_text(value)
        fresh = self.header.with_suffix(".tmp")
        fresh.write_text(text)
        fresh.replace(self.header)
        at = round(time.monotonic() - self.t0, 1)
        self.header_versions.append((text_hash(text.encode()), value, at))

    # -- processes

    def server_pid(self) -> int | None:
        try:
            pid = int(self.paths.lock.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if running(pid) else None

    def start_client(self, ids: list[int]) -> Client:
        number = len(self.clients)
        out = self.root / "out" / f"client{number}.jsonl"
        ids_file = self.root / "out" / f"client{number}.ids.json"
        ids_file.write_text(json.dumps(ids))
        argv = [sys.executable, "-m", "benchmarks.server.soak", "client", str(ids_file)]
        argv += [str(out), json.dumps(dataclasses.asdict(self.mix)), str(self.args.batch)]
        with (self.root / "out" / f"client{number}.stderr").open("wb") as err:
            process = subprocess.Popen(argv, env=self.env, stdout=err, stderr=err)
        client = Client(number, process, ids, out, assigned=frozenset(ids))
        self.clients.append(client)
        return client

    def _descendants(self, kind: str) -> list[psutil.Process]:
        """The server's NVRTC or nvJitLink workers, or the processes of its nvcc runs
        (nvcc and the tools it runs: the host compiler's too), by name."""
        pid = self.server_pid()
        if pid is None:
            return []
        names = (
            NVCC_TOOLS
            if kind == "nvcc"
            else ("acw-nvjitlink",)
            if kind == "nvjitlink"
            else ("acw-nvrtc",)
        )
        found = []
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in psutil.Process(pid).children(recursive=True):
                with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                    if child.name() in names:
                        found.append(child)
        return found

    @staticmethod
    def _runs_workers(pid: int) -> bool:
        """Whether process ``pid`` has worker processes of its own: a client compiles
        nothing itself, every job goes to the server (a server a client starts is its
        descendant while ``asynccomp serve --detach`` runs: its workers are not the
        client's; a client's forked child is a python process, not a worker)."""
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            for child in psutil.Process(pid).children(recursive=True):
                with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                    if not child.name().startswith(WORKER_PREFIXES):
                        continue
                    chain = child.parents()  # its parent first
                    pids = [p.pid for p in chain]
                    between = chain[: pids.index(pid)] if pid in pids else []
                    if not any("serve" in p.cmdline() for p in between):
                        return True
        return False

    def _live_clients(self) -> list[Client]:
        with self.lock:
            return [c for c in self.clients if c.process.poll() is None and not c.killed]

    # -- chaos

    def _strike(self, kind: str) -> str | None:
        """One chaos event; what it hit, or None when there was nothing to hit."""
        if kind in ("nvrtc_worker", "nvcc"):
            targets = self._descendants(kind)
            if not targets:
                return None
            target = random.choice(targets)
            try:
                what = f"{target.pid} {target.name()}"
                target.kill()
            except psutil.NoSuchProcess:
                return None  # it ended first: look again
            return what
        if kind == "redis":
            self.redis.kill()
            time.sleep(1.0)
            self.redis.start()
            return f"port {self.redis.port}"
        if kind == "server":
            pid = self.server_pid()
            if pid is None:
                return None
            self.count_cache()
            # Under the lock clients take to start a server: none starts one before the
            # disk cache is gone (a fresh machine: its hits come from Redis, or compiles).
            fd = os.open(self.paths.spawn, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                with contextlib.suppress(psutil.NoSuchProcess):
                    victim = psutil.Process(pid)
                    victim.kill()
                    victim.wait(30)
                shutil.rmtree(self.root / "cache", ignore_errors=True)
            finally:
                os.close(fd)
            start_server(self.paths, self.env)  # clients may have started it already
            return f"{pid} -> {self.server_pid()}"
        if kind == "header":
            value = self.header_versions[-1][1] + 1
            self.write_header(value)
            return f"VALUE {value}"
        clients = self._live_clients()
        if kind == "fork":  # one that handles the signal by now
            clients = [c for c in clients if c.out.with_suffix(".ready").exists()]
        if not clients:
            return None
        client = random.choice(clients)
        if kind == "fork":
            # In turn: a child that exits normally (SIGUSR1), one that calls os._exit.
            number = (signal.SIGUSR1, signal.SIGUSR2)[self.forks_asked % 2]
            self.forks_asked += 1
            client.process.send_signal(number)
            return f"client {client.number} {soak_client.FORK_MODES[number]}"
        if kind == "client_stop":
            client.process.send_signal(signal.SIGSTOP)
            self.stop.wait(self.args.stop_seconds)
            client.process.send_signal(signal.SIGCONT)
            return f"client {client.number} stopped {self.args.stop_seconds:g} s"
        with self.lock:
            client.killed = True
            client.process.kill()
        return f"client {client.number}"

    def chaos(self) -> None:
        kinds = [k for k in CHAOS if k in self.args.chaos]
        turn = 0
        while kinds and not self.stop.wait(self.args.chaos_interval):
            kind = kinds[turn % len(kinds)]
            deadline = time.monotonic() + self.args.chaos_interval
            try:
                hit = self._strike(kind)
                while hit is None and time.monotonic() < deadline and not self.stop.is_set():
                    time.sleep(0.05)  # nothing to hit yet (no nvcc running): look again
                    hit = self._strike(kind)
            except Exception as exc:  # the soak's own failure: reported, chaos goes on
                hit = None
                self.violations.append(f"chaos {kind} failed: {exc!r}")
            at = round(time.monotonic() - self.t0, 1)
            self.events.append({"t": at, "kind": kind, "hit": hit})
            turn += 1

    def count_cache(self) -> None:
        """Add the running server's cache counters (hits per tier, forged, ...) to the
        run's: asked before each kill and at the end."""
        try:
            counts = compile_server.status(self.paths.socket).get("cache_stats") or {}
        except AsyncCompError:
            return
        for name, value in counts.items():
            if isinstance(value, int) and not isinstance(value, bool):
                self.cache_counts[name] += value

    # -- the run

    def records(self) -> dict[int, list[dict[str, Any]]]:
        found: dict[int, list[dict[str, Any]]] = {}
        for client in self.clients:
            if not client.out.exists():
                continue
            for line in client.out.read_text().splitlines():
                record = json.loads(line)
                record["client"] = client.number
                found.setdefault(record["id"], []).append(record)
        return found

    def _sample(self) -> None:
        now = round(time.monotonic() - self.t0, 2)
        pid = self.server_pid()
        if pid is not None and (rss := _rss(pid)) is not None:
            self.rss.setdefault(f"server {pid}", []).append((now, rss))
        for client in self._live_clients():
            if (rss := _rss(client.process.pid)) is not None:
                self.rss.setdefault(f"client {client.number}", []).append((now, rss))
            if self._runs_workers(client.process.pid):
                self.clients_with_workers.add(client.number)
        self.nvjitlink_workers.update(p.pid for p in self._descendants("nvjitlink"))

    def run(self) -> None:
        self.redis.start()
        start_server(self.paths, self.env)
        share = -(-self.args.jobs // self.args.clients)
        for k in range(self.args.clients):
            self.start_client(list(range(k * share, min(self.args.jobs, (k + 1) * share))))
        chaos = threading.Thread(target=self.chaos, name="chaos")
        chaos.start()
        deadline = self.t0 + self.args.max_seconds
        next_report = self.t0 + self.args.report_every
        try:
            while True:
                self._sample()
                with self.lock:
                    ended = [c for c in self.clients if c.process.poll() is not None]
                    running = len(self.clients) - len(ended)
                for client in ended:
                    if client.killed and client.ids:
                        done = self.records()
                        left = [i for i in client.ids if i not in done]
                        client.ids = []  # handed on once
                        if left:
                            self.resubmitted += len(left)
                            with self.lock:
                                self.start_client(left)
                            running += 1
                    elif not client.killed and client.process.returncode not in (0, None):
                        self.violations.append(
                            f"client {client.number} exited with {client.process.returncode}"
                        )
                        client.killed = True  # reported once
                if running == 0:
                    break
                if time.monotonic() >= next_report:
                    next_report += self.args.report_every
                    print(
                        f"soak: {time.monotonic() - self.t0:.0f} s, "
                        f"{sum(len(f) for f in self.records().values())} results, "
                        f"{len(self.events)} chaos events",
                        flush=True,
                    )
                if time.monotonic() > deadline:
                    self.violations.append(f"the run passed --max-seconds {self.args.max_seconds}")
                    break
                time.sleep(1.0)
        finally:
            self.stop.set()
            chaos.join()
            for client in self.clients:
                with contextlib.suppress(ProcessLookupError):
                    client.process.send_signal(signal.SIGCONT)
                if client.process.poll() is None:
                    client.process.kill()
                client.process.wait()
        self.elapsed = time.monotonic() - self.t0

    def teardown(self) -> dict[str, Any]:
        """Stop the server and Redis as a user would, then look for what is left."""
        pid = self.server_pid()
        self.count_cache()
        with contextlib.suppress(AsyncCompError):
            compile_server.stop(self.paths.socket)
        if pid is not None:
            try:
                psutil.Process(pid).wait(60)
            except psutil.NoSuchProcess:
                pass
            except psutil.TimeoutExpired:
                self.violations.append(f"the server (pid {pid}) did not stop within 60 s")
        self.redis.kill()
        deadline = time.monotonic() + 30
        while (left := _ours(self.marker)) and time.monotonic() < deadline:
            time.sleep(0.2)
        found: dict[str, Any] = {"processes": [], "folders": [], "sockets": []}
        for process in left:
            with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                found["processes"].append(f"{process.pid} {' '.join(process.cmdline())[:120]}")
                process.kill()
        # Per-user folders that stay by design (asynccomp-nvrtc-<uid>, the workers'
        # root; asynccomp-empty-<uid>): what they hold is what was left.
        shared = {f"asynccomp-{kind}-{os.getuid()}" for kind in ("nvrtc", "empty")}
        for path in sorted(self.tmp.iterdir()):
            inside = sorted(path.iterdir()) if path.name in shared else [path]
            found["folders"] += [str(p) for p in inside]
        found["sockets"] = sorted(str(p) for p in self.paths.folder.glob("*.sock"))
        with open("/proc/net/unix") as table:
            found["sockets"] += [
                line.split()[-1] for line in table if str(self.root) in line.split()[-1]
            ]
        for what, items in found.items():
            if items:
                self.violations.append(f"{what} left after the run: {items[:5]}")
        return found

    def references(
        self, records: dict[int, list[dict[str, Any]]], forks: list[dict[str, Any]]
    ) -> dict[str, str]:
        """SHA-256 of a reference compile (this process, no cache) per distinct source
        that some job got a binary for, by :meth:`Spec.reference_key`; a ``header``
        job's for each version of the header its binary is compared with (the header
        written back with that version's content, the same path and options)."""
        plain: dict[str, Spec] = {}
        by_version: dict[str, dict[str, Spec]] = {}
        for i, found in records.items():
            if not any("sha" in r for r in found):
                continue
            spec = job_spec(i, self.mix)
            if spec.kind != "header":
                plain.setdefault(spec.reference_key(), spec)
                continue
            for record in found:
                for version in self.versions_between(*record.get("hdr", [None, None])):
                    by_version.setdefault(version, {}).setdefault(spec.reference_key(version), spec)
        for fork in forks:
            if "sha" in (fork.get("child") or {}):
                spec = fork_spec(fork["child"]["value"])
                plain.setdefault(spec.reference_key(), spec)

        async def compile_all(specs: dict[str, Spec]) -> dict[str, str]:
            async with Engine(arch=ARCH, cache=False) as engine:
                results = await engine.compile_many([spec.job() for spec in specs.values()])
            return {
                key: hashlib.sha256(r.unwrap()).hexdigest()
                for key, r in zip(specs, results, strict=True)
            }

        reference = anyio.run(compile_all, plain)
        values = {h: value for h, value, _ in self.header_versions}
        for version, specs in sorted(by_version.items()):
            text = header_text(values[version])
            self.header.write_text(text)
            reference |= anyio.run(compile_all, specs)
        return reference

    def versions_between(self, before: str | None, after: str | None) -> list[str]:
        """The header's versions from ``before`` to ``after`` (content hashes; a version
        is never written twice), or none when either is unknown."""
        order = [h for h, _, _ in self.header_versions]
        if before not in order or after not in order:
            return []
        return order[order.index(before) : order.index(after) + 1]

    def fork_records(self) -> list[dict[str, Any]]:
        """Every fork the clients made: what the parent noted (mode, exit status,
        ``hung``) and the child's own line (``child``)."""
        forks: list[dict[str, Any]] = []
        for client in self.clients:
            log = client.out.with_suffix(".forks.jsonl")
            made: dict[int, dict[str, Any]] = {}
            if log.exists():
                for line in log.read_text().splitlines():
                    entry = json.loads(line)
                    made.setdefault(entry["fork"], {"client": client.number}).update(entry)
            for number, fork in sorted(made.items()):
                child = client.out.with_suffix(f".fork{number}.jsonl")
                lines = child.read_text().splitlines() if child.exists() else []
                fork["child"] = json.loads(lines[0]) if lines else None
                fork["child_lines"] = len(lines)
                fork["parent_killed"] = client.killed
                forks.append(fork)
        return forks

    def chaos_caused(self, got: str, message: str, backend: str) -> bool:
        """Whether error ``got`` is one that a chaos kind of this run causes."""
        if got == "InternalError":
            return "killed by" in message and backend == "nvcc" and "nvcc" in self.args.chaos
        return CHAOS_ERRORS.get(got) in self.args.chaos

    def judge(self) -> dict[str, Any]:
        records = self.records()
        forks = self.fork_records()
        lost = [i for i in range(self.args.jobs) if i not in records]
        duplicated = sorted(i for i, found in records.items() if len(found) > 1)
        assigned = {c.number: c.assigned for c in self.clients}
        foreign = sorted(
            i for i, found in records.items() for r in found if i not in assigned[r["client"]]
        )
        reference = self.references(records, forks)
        outcomes: Counter[str] = Counter()
        wrong: list[str] = []
        stale: list[str] = []
        header = Counter[str]()
        for i, found in sorted(records.items()):
            spec = job_spec(i, self.mix)
            record = found[0]
            got = "ok" if "sha" in record else record["error"]
            message = record.get("msg", "")
            outcomes[f"{spec.kind} {spec.backend} {got}"] += 1
            said = f"job {i} ({spec.kind} {spec.backend}): {got}: {message}"
            if spec.kind == "refused":  # refused as it is built, saying why; nothing else
                if not (
                    got == "InvalidJob" and record.get("built") is False and REFUSED_SAYS in message
                ):
                    wrong.append(said)
                continue
            if record.get("built") is False:
                wrong.append(f"{said} (as it was built)")
                continue
            if got == "ok" and spec.kind == "header":
                before, after = record["hdr"]
                header["same" if before == after else "ambiguous"] += 1
                versions = self.versions_between(before, after)
                fits = {reference.get(spec.reference_key(v)) for v in versions}
                if record["sha"] not in fits:
                    stale.append(
                        f"job {i} ({spec.backend}, header {before} .. {after}: versions "
                        f"{[v[1] for v in self.header_versions if v[0] in versions]}): "
                        "binary of another header"
                    )
            elif got == "ok" and record["sha"] != reference.get(spec.reference_key()):
                wrong.append(f"job {i} ({spec.kind} {spec.backend}): binary differs from reference")
            if got == EXPECTED[spec.kind]:
                if spec.kind == "wedge" and WEDGE_SAYS not in message:
                    wrong.append(f"{said} (not nvJitLink's {WEDGE_SAYS})")
            elif not self.chaos_caused(got, message, spec.backend):
                wrong.append(said)
        fork_problems: list[str] = []
        fork_outcomes: Counter[str] = Counter()
        for fork in forks:
            child, name = (
                fork["child"],
                f"client {fork['client']}'s fork {fork['fork']} ({fork['mode']})",
            )
            if "status" in fork:
                if fork.get("hung") or fork["status"] != 0:
                    hung = ", hung" if fork.get("hung") else ""
                    fork_problems.append(f"{name}: exit status {fork['status']}{hung}")
                if child is None:
                    fork_problems.append(f"{name}: ended without its line")
            elif not fork["parent_killed"]:
                fork_problems.append(f"{name}: never reaped by its parent")
            if fork["child_lines"] > 1:
                fork_problems.append(f"{name}: {fork['child_lines']} lines")
            if child is None:
                continue
            got = "ok" if "sha" in child else child["error"]
            fork_outcomes[f"{fork['mode']} {got}"] += 1
            if got == "ok":
                if child["sha"] != reference.get(fork_spec(child["value"]).reference_key()):
                    fork_problems.append(f"{name}: binary differs from reference")
            elif not self.chaos_caused(got, child.get("msg", ""), "nvrtc"):
                fork_problems.append(f"{name}: {got}: {child.get('msg', '')}")
        if lost:
            self.violations.append(f"{len(lost)} jobs lost, e.g. {lost[:5]}")
        if duplicated:
            self.violations.append(f"{len(duplicated)} jobs duplicated, e.g. {duplicated[:5]}")
        if foreign:
            self.violations.append(
                f"{len(foreign)} lines in another client's file, e.g. {foreign[:5]}"
            )
        if wrong:
            self.violations.append(f"{len(wrong)} wrong outcomes, e.g. {wrong[:5]}")
        if stale:
            self.violations.append(f"{len(stale)} stale binaries, e.g. {stale[:5]}")
        if fork_problems:
            self.violations.append(f"{len(fork_problems)} fork problems, e.g. {fork_problems[:5]}")
        if self.clients_with_workers:
            self.violations.append(
                f"clients {sorted(self.clients_with_workers)} ran workers of their own"
            )
        compiled_ptx = any(
            k.split()[1] == "nvjitlink" and k.split()[2] in ("ok", "CompileError") for k in outcomes
        )
        if compiled_ptx and not self.nvjitlink_workers:
            self.violations.append(
                "nvJitLink jobs were answered, but the server never had an nvJitLink worker"
            )
        memory = {name: memory_trend(samples) for name, samples in self.rss.items()}
        servers = [n for n, m in memory.items() if n.startswith("server") and m["judged"]]
        judged = [n for n, m in memory.items() if n.startswith("client") and m["judged"]]
        if servers:  # the longest-lived server
            judged.append(max(servers, key=lambda n: memory[n]["seconds"]))
        for name in judged:
            trend = memory[name]
            if trend["growth_mib"] > self.args.max_growth_mib:
                self.violations.append(f"{name} grew {trend['growth_mib']} MiB after warm-up")
        return {
            "jobs": self.args.jobs,
            "recorded": sum(len(f) for f in records.values()),
            "lost": len(lost),
            "duplicated": len(duplicated),
            "foreign": len(foreign),
            "resubmitted": self.resubmitted,
            "clients_started": len(self.clients),
            "distinct_references": len(reference),
            "outcomes": dict(sorted(outcomes.items())),
            "cached": sum(1 for f in records.values() if f[0].get("cached")),
            "server_cache": dict(sorted(self.cache_counts.items())),
            "wrong": wrong[:20],
            "stale": stale[:20],
            "nvjitlink_server_workers": len(self.nvjitlink_workers),
            "header": {
                "versions": len(self.header_versions),
                "checked": header["same"],
                "ambiguous": header["ambiguous"],
                "stale": len(stale),
            },
            "forks": {
                "asked": self.forks_asked,
                "made": len(forks),
                "modes": dict(Counter(f["mode"] for f in forks)),
                "exited_0": sum(1 for f in forks if f.get("status") == 0 and not f.get("hung")),
                "orphaned": sum(1 for f in forks if "status" not in f),
                "child_outcomes": dict(sorted(fork_outcomes.items())),
                "problems": fork_problems[:20],
            },
            "memory": memory,
        }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "client":
        ids_file, out, mix, batch = argv[1:5]
        return soak_client.run(Path(ids_file), Path(out), Mix(**json.loads(mix)), int(batch))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10000)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--batch", type=int, default=200, help="jobs per client call")
    parser.add_argument("--chaos-interval", type=float, default=4.0, help="seconds")
    parser.add_argument(
        "--chaos",
        type=lambda s: [k for k in s.split(",") if k],
        default=list(CHAOS),
        help=f"chaos kinds, comma-separated (default all: {','.join(CHAOS)})",
    )
    parser.add_argument("--stop-seconds", type=float, default=3.0, help="a client's SIGSTOP")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--miss", type=float, default=Mix.miss, help="share of misses")
    parser.add_argument("--fail", type=float, default=Mix.fail, help="share of broken sources")
    parser.add_argument("--timeout", type=float, default=Mix.timeout, help="share timing out")
    parser.add_argument("--ptx", type=float, default=Mix.ptx, help="share of nvJitLink jobs")
    parser.add_argument("--wedge", type=float, default=Mix.wedge, help="share wedging nvJitLink")
    parser.add_argument("--header", type=float, default=Mix.header, help="share with -include")
    parser.add_argument("--refused", type=float, default=Mix.refused, help="share of -optf")
    parser.add_argument("--max-growth-mib", type=float, default=32.0)
    parser.add_argument("--max-seconds", type=float, default=1800.0)
    parser.add_argument("--report-every", type=float, default=60.0, help="progress, seconds")
    parser.add_argument("--json", type=Path, help="write the result here")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder (logs)")
    args = parser.parse_args(argv)
    unknown = set(args.chaos) - set(CHAOS)
    if unknown:
        parser.error(f"unknown chaos kinds {sorted(unknown)}; known: {', '.join(CHAOS)}")
    soak = Soak(args)
    print(f"soak: {args.jobs} jobs, {args.clients} clients, folder {soak.root}", flush=True)
    try:
        soak.run()
        left = soak.teardown()
        result = soak.judge()
    finally:
        for process in _ours(soak.marker):
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        soak.redis.kill()
        if not args.keep:
            shutil.rmtree(soak.root, ignore_errors=True)
    chaos_hits = Counter(e["kind"] for e in soak.events if e["hit"] is not None)
    result.update(
        seconds=round(soak.elapsed, 1),
        total_seconds=round(time.monotonic() - soak.t0, 1),  # with references, teardown
        chaos={k: chaos_hits.get(k, 0) for k in CHAOS if k in args.chaos},
        chaos_missed=sum(1 for e in soak.events if e["hit"] is None),
        events=soak.events,
        left=left,
        violations=soak.violations,
        args={k: v for k, v in vars(args).items() if k != "json"} | {"json": str(args.json)},
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str) + "\n")
    rate = args.jobs / max(soak.elapsed, 1e-9)
    print(
        f"soak: {result['recorded']} results in {result['seconds']} s ({rate:.0f} jobs/s); "
        f"{result['total_seconds']} s with the reference compiles and the checks"
    )
    print(
        f"soak: lost {result['lost']}, duplicated {result['duplicated']}, "
        f"resubmitted {result['resubmitted']}, cached {result['cached']}"
    )
    print(f"soak: server cache {result['server_cache']}")
    print(f"soak: chaos {result['chaos']} (missed {result['chaos_missed']})")
    for name, outcome in result["outcomes"].items():
        print(f"soak:   {outcome:7d} {name}")
    print(
        f"soak: nvJitLink workers of the server seen {result['nvjitlink_server_workers']}; "
        f"header {result['header']}"
    )
    print(f"soak: forks {result['forks']}")
    for name, trend in result["memory"].items():
        print(f"soak: rss {name}: {trend}")
    for violation in soak.violations:
        print(f"soak: VIOLATION {violation}")
    print("soak: FAILED" if soak.violations else "soak: passed", flush=True)
    return 1 if soak.violations else 0


if __name__ == "__main__":
    sys.exit(main())
