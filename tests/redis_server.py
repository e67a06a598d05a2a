"""A real Redis server (Debian's redis-server) for the remote cache's tests.

A remote tier needs the team's key (``$ASYNCCOMP_REMOTE_CACHE_KEY``): a test that uses
one asks for the :func:`team_key` fixture (``redis_server`` does), which puts
:data:`TEAM_KEY` in the environment for that test alone, as the machines of a team
sharing that Redis would have it. (A server that set it itself leaked it into later
tests of the process whenever two were stopped out of order.)
"""

from __future__ import annotations

import io
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from asynccomp.cache import REMOTE_CACHE_KEY_ENV, REMOTE_CACHE_KEY_FILE_ENV

__all__ = ("TEAM_KEY", "RedisServer", "free_port", "redis_server", "team_key")

#: The key the tests' team shares (a real key would be random: secrets.token_hex(32)).
TEAM_KEY = "the tests' team key, 0123456789abcdef"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RedisServer:
    """``redis-server`` on a free local port, without persistence. ``password``: clients
    must log in (``requirepass``), and :attr:`url` says the password."""

    def __init__(self, folder: Path, *, password: str | None = None) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed (apt-get install redis-server)")
        self.password = password
        # A free port may be taken by another test process before redis binds it (the
        # suite runs on several): then redis exits at once, and another port is tried.
        for _ in range(5):
            self.port = free_port()
            self.process = self._start(binary, folder)
            if self._answered():
                break
        else:
            raise RuntimeError("redis-server did not start on any of 5 free ports")
        login = f":{password}@" if password is not None else ""
        self.url = f"redis://{login}127.0.0.1:{self.port}/0"

    def _start(self, binary: str, folder: Path) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(folder),
                *(["--requirepass", self.password] if self.password is not None else []),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def _answered(self) -> bool:
        """Whether the server just started answers (False: it exited, its port taken)."""
        deadline = time.monotonic() + 20
        while not self.answers():
            if self.process.poll() is not None:
                return False
            if time.monotonic() > deadline:
                self.process.kill()
                self.process.wait()
                raise RuntimeError("redis-server did not answer within 20 s")
            time.sleep(0.02)
        # The answer may have come from another test process's redis on that port.
        return self._listens()

    def _listens(self) -> bool:
        try:
            sockets = psutil.Process(self.process.pid).net_connections("tcp")
        except psutil.Error:
            return False
        return any(c.status == psutil.CONN_LISTEN and c.laddr.port == self.port for c in sockets)

    def _send(self, sock: socket.socket, *args: str | bytes) -> io.BufferedReader:
        """Log in when the server wants it, send one command; the reply's stream."""
        login = [("AUTH", self.password)] if self.password is not None else []
        parts = []
        for command in [*login, args]:
            parts.append(b"*%d\r\n" % len(command))
            for arg in command:
                data = arg if isinstance(arg, bytes) else arg.encode()
                parts += [b"$%d\r\n" % len(data), data, b"\r\n"]
        sock.sendall(b"".join(parts))
        reply = sock.makefile("rb")
        if login:
            assert reply.readline() == b"+OK\r\n"
        return reply

    def command(self, *args: str | bytes) -> bytes:
        """One raw command and the raw reply (for the tests' own checks)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            reply = self._send(sock, *args)
            return reply.read1(1 << 20)

    def get(self, key: bytes) -> bytes | None:
        """The value under ``key`` (read whole, however large)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            reply = self._send(sock, "GET", key)
            size = int(reply.readline()[1:])
            return None if size < 0 else reply.read(size)

    def set(self, key: bytes, value: bytes) -> None:
        """Store ``value`` under ``key``, as anyone who can reach the Redis can."""
        assert self.command("SET", key, value).startswith(b"+OK")

    def info(self, section: str = "stats") -> dict[str, str]:
        """The server's ``INFO`` of ``section``, as names and values."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
            reply = self._send(sock, "INFO", section)
            size = int(reply.readline()[1:])
            text = reply.read(size).decode()
        return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)

    def answers(self) -> bool:
        try:
            return self.command("PING").startswith(b"+PONG")
        except OSError:
            return False

    def stored_keys(self) -> list[bytes]:
        reply = self.command("KEYS", "*")
        return [line for line in reply.split(b"\r\n") if line and line[:1] not in b"*$"]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


@pytest.fixture
def team_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """The team's key in the environment (for remote tiers without a RedisServer)."""
    monkeypatch.delenv(REMOTE_CACHE_KEY_FILE_ENV, raising=False)
    monkeypatch.setenv(REMOTE_CACHE_KEY_ENV, TEAM_KEY)
    return TEAM_KEY


@pytest.fixture
def redis_server(tmp_path: Path, team_key: str) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    try:
        yield server
    finally:
        server.stop()
