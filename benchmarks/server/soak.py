"""A fault soak: many jobs through the compile server while a chaos loop breaks things.

A private compile server (its own ``$ASYNCCOMP_SERVER_DIR``, disk cache and ``TMPDIR``)
with a private, password-protected ``redis-server`` as its remote tier (the team's key
in ``$ASYNCCOMP_REMOTE_CACHE_KEY``, as the manual's cache guide sets it up) serves K
client processes (``python -m benchmarks.server.soak client``: an ``Engine(server="auto")``
each, batches through ``as_completed``). Each job is drawn from a deterministic mix
(:func:`job_kind`): cache hits (a few hot ``-DF=`` variants), misses (a source of
their own), sources that fail to compile, and slow sources with a short timeout, NVRTC
and nvcc. Meanwhile a chaos thread, every ``--chaos-interval`` seconds, in turn:
SIGKILLs the server and starts it again with an empty disk cache (a fresh machine: its
hits come from Redis, or are compiled again), SIGKILLs an NVRTC worker, SIGKILLs nvcc
or a tool it runs (cicc, ptxas, gcc's cc1plus, ...), restarts Redis (SIGKILL; its
append-only file keeps what it held), SIGSTOPs a client for ``--stop-seconds``,
SIGKILLs a client. ``--chaos`` picks kinds (``--chaos ""``: none).

Accounting: each client appends one JSON line per job (``ok`` with the binary's
SHA-256, or the error's class name and message). A killed client's jobs without a line
are handed to a fresh client (``resubmitted``); a line it wrote stands. At the end:

- every job has exactly one line (none lost, none duplicated);
- every error is typed and fits the job: ``CompileError`` for the broken sources,
  ``CompileTimeout`` for the slow ones, and what chaos causes (``ServerLost``,
  ``WorkerCrashed``, ``ServerError`` for a whole call; for nvcc jobs ``InternalError``
  saying what was "killed by" a signal) for any job;
- every binary equals a reference compile of its source (in this process, no cache,
  once per distinct source);
- server and client RSS flat after warm-up (growth after the first 30% of a process's
  samples, and a slope, reported; over ``--max-growth-mib`` is a violation);
- after the server is stopped: no process that carries this run's marker variable
  (server, workers, nvcc guards, redis, clients), nothing in the private ``TMPDIR``, no
  socket in the server folder or bound under the run's folder.

It prints a summary, writes ``--json``, and exits 1 on any violation::

    python -m benchmarks.server.soak --jobs 10000 --clients 2 --chaos-interval 4
    python -m benchmarks.server.soak --jobs 100000 --clients 3 --chaos-interval 10 --json soak.json

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
from typing import Any, Literal

import anyio
import psutil

from asynccomp import AsyncCompError, CompileJob, CompileResult, Engine
from asynccomp import server as compile_server
from asynccomp._os import python_path, rss, running
from asynccomp.server import ServerPaths, server_paths, start_server

ARCH = "sm_90a"
MARKER = "ASYNCCOMP_SOAK_RUN"  # in the environment of everything the soak starts
#: The chaos kinds, in the order they take turns (the server's kill well after Redis's
#: restart: its successor's remote tier finds Redis up, with what it held).
CHAOS = ("server", "nvrtc_worker", "nvcc", "redis", "client_stop", "client_kill")
#: What chaos may cause any job (InternalError only when it says "killed by": a killed nvcc).
CHAOS_ERRORS = ("ServerLost", "WorkerCrashed", "ServerError")
NVCC_TOOLS = ("nvcc", "cicc", "ptxas", "cc1plus", "fatbinary", "cudafe++")
EXPECTED = {"hit": "ok", "miss": "ok", "fail": "CompileError", "timeout": "CompileTimeout"}

SCALE = (
    'extern "C" __global__ void scale(float* x, int n) {\n'
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] = x[i] * F + 1.0f;\n"
    "}\n"
)


def _broken(variant: int) -> str:
    return (
        'extern "C" __global__ void broken(float* x) {\n'
        f"  x[threadIdx.x] = undefined_identifier_{variant};\n}}\n"
    )


def _slow(statements: int) -> str:
    body = "".join(
        f"  a = a * {1.0 + i * 1e-6:.7f}f + __sinf(a + {i}.0f);\n" for i in range(statements)
    )
    return 'extern "C" __global__ void slow(float* x) {\n  float a = x[threadIdx.x];\n' + (
        body + "  x[threadIdx.x] = a;\n}\n"
    )


@dataclasses.dataclass(frozen=True)
class Mix:
    """Shares of the job kinds (the rest are hits on ``hot`` variants), and of nvcc."""

    seed: int = 1
    hot: int = 16
    miss: float = 0.02
    fail: float = 0.01
    timeout: float = 0.002
    nvcc: float = 0.1
    slow_timeout: float = 0.5
    slow_statements: int = 20000


def job_kind(i: int, mix: Mix) -> tuple[str, CompileJob]:
    """Job ``i`` of the mix, and its kind: the same on every process, every run."""
    rng = random.Random(mix.seed * 1_000_003 + i)
    backend: Literal["nvrtc", "nvcc"] = "nvcc" if rng.random() < mix.nvcc else "nvrtc"
    draw = rng.random()
    timeout: float | None = None
    source, options = SCALE, ""
    if draw < mix.timeout:
        kind, source, timeout = "timeout", _slow(mix.slow_statements), mix.slow_timeout
    elif draw < mix.timeout + mix.fail:
        kind, source = "fail", _broken(rng.randrange(3))
    elif draw < mix.timeout + mix.fail + mix.miss:
        kind, options = "miss", f"-DF={i}.25f"
    else:
        kind, options = "hit", f"-DF={rng.randrange(mix.hot) + 1}.0f"
    job = CompileJob(
        source,
        name=f"j{i}",
        backend=backend,
        arch=ARCH,
        options=(options,) if options else (),
        timeout=timeout,
    )
    return kind, job


def _reference_key(job: CompileJob) -> str:
    text = json.dumps([job.backend, job.source, list(job.options)])
    return hashlib.sha256(text.encode()).hexdigest()


# -- the client process ----------------------------------------------------------------


def _record(result: CompileResult) -> dict[str, Any]:
    i = int(result.job.name[1:])
    if result.ok:
        binary = result.binary or b""
        return {"id": i, "sha": hashlib.sha256(binary).hexdigest(), "cached": result.cached}
    error = result.error
    return {"id": i, "error": type(error).__name__, "msg": str(error)[:300]}


async def _client(ids: list[int], mix: Mix, out: Path, batch: int) -> None:
    fd = os.open(out, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def write(record: dict[str, Any]) -> None:  # one write per line: a kill cuts no line
        os.write(fd, (json.dumps(record) + "\n").encode())

    async with Engine(arch=ARCH, server="auto") as engine:
        for start in range(0, len(ids), batch):
            left = ids[start : start + batch]
            jobs = [job_kind(i, mix)[1] for i in left]
            pending = set(left)
            try:
                async with engine.as_completed(jobs) as results:
                    async for result in results:
                        record = _record(result)
                        pending.discard(record["id"])
                        write(record)
            except Exception as exc:  # the whole call failed: its jobs say so
                typed = isinstance(exc, AsyncCompError)
                name = type(exc).__name__ if typed else f"untyped:{type(exc).__name__}"
                for i in sorted(pending):
                    write({"id": i, "error": name, "msg": str(exc)[:300], "call": True})
    os.close(fd)


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
        self.mix = Mix(seed=args.seed, miss=args.miss, fail=args.fail, timeout=args.timeout)
        self.marker = secrets.token_hex(6)
        # Short: the server's socket path must fit in 107 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="acsoak-", dir="/tmp"))
        self.tmp = self.root / "tmp"
        for folder in (self.tmp, self.root / "redis", self.root / "out"):
            folder.mkdir(mode=0o700)
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
        self.t0 = time.monotonic()

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
        client = Client(number, process, ids, out)
        self.clients.append(client)
        return client

    def _descendants(self, kind: str) -> list[psutil.Process]:
        """The server's NVRTC workers, or the processes of its nvcc runs (nvcc and the
        tools it runs: the host compiler's too), by name."""
        pid = self.server_pid()
        if pid is None:
            return []
        found = []
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in psutil.Process(pid).children(recursive=True):
                with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                    if kind == "nvcc":
                        hit = child.name() in NVCC_TOOLS
                    else:
                        hit = child.name() == "acw-nvrtc"
                    if hit:
                        found.append(child)
        return found

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
        clients = self._live_clients()
        if not clients:
            return None
        client = random.choice(clients)
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

    def references(self, records: dict[int, list[dict[str, Any]]]) -> dict[str, str]:
        """SHA-256 of a reference compile (this process, no cache) per distinct source
        that some job got a binary for."""
        distinct: dict[str, CompileJob] = {}
        for i, found in records.items():
            if any("sha" in r for r in found):
                job = job_kind(i, self.mix)[1]
                distinct.setdefault(_reference_key(job), job)

        async def compile_all() -> list[CompileResult]:
            async with Engine(arch=ARCH, cache=False) as engine:
                return await engine.compile_many(list(distinct.values()))

        results = anyio.run(compile_all)
        return {
            key: hashlib.sha256(r.unwrap()).hexdigest()
            for key, r in zip(distinct, results, strict=True)
        }

    def judge(self) -> dict[str, Any]:
        records = self.records()
        lost = [i for i in range(self.args.jobs) if i not in records]
        duplicated = sorted(i for i, found in records.items() if len(found) > 1)
        reference = self.references(records)
        outcomes: Counter[str] = Counter()
        wrong: list[str] = []
        for i, found in sorted(records.items()):
            kind, job = job_kind(i, self.mix)
            record = found[0]
            got = "ok" if "sha" in record else record["error"]
            outcomes[f"{kind} {job.backend} {got}"] += 1
            if got == "ok" and record["sha"] != reference.get(_reference_key(job)):
                wrong.append(f"job {i} ({kind} {job.backend}): binary differs from reference")
            fits = got == EXPECTED[kind] or got in CHAOS_ERRORS
            signal_kill = got == "InternalError" and "killed by" in record.get("msg", "")
            if not fits and not (signal_kill and job.backend == "nvcc"):
                wrong.append(f"job {i} ({kind} {job.backend}): {got}: {record.get('msg', '')}")
        if lost:
            self.violations.append(f"{len(lost)} jobs lost, e.g. {lost[:5]}")
        if duplicated:
            self.violations.append(f"{len(duplicated)} jobs duplicated, e.g. {duplicated[:5]}")
        if wrong:
            self.violations.append(f"{len(wrong)} wrong outcomes, e.g. {wrong[:5]}")
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
            "resubmitted": self.resubmitted,
            "clients_started": len(self.clients),
            "distinct_references": len(reference),
            "outcomes": dict(sorted(outcomes.items())),
            "cached": sum(1 for f in records.values() if f[0].get("cached")),
            "server_cache": dict(sorted(self.cache_counts.items())),
            "wrong": wrong[:20],
            "memory": memory,
        }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "client":
        ids_file, out, mix, batch = argv[1:5]
        ids = json.loads(Path(ids_file).read_text())
        anyio.run(_client, ids, Mix(**json.loads(mix)), Path(out), int(batch))
        return 0
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
    for name, trend in result["memory"].items():
        print(f"soak: rss {name}: {trend}")
    for violation in soak.violations:
        print(f"soak: VIOLATION {violation}")
    print("soak: FAILED" if soak.violations else "soak: passed", flush=True)
    return 1 if soak.violations else 0


if __name__ == "__main__":
    sys.exit(main())
