"""The fault soak (``benchmarks/server/soak.py``, issues 28 and 37), scaled to CI: 20,000 jobs
from two client processes through a real compile server with a real Redis tier, while
its chaos loop kills NVRTC workers and nvcc's tools, restarts Redis, SIGKILLs and
restarts the server, stops and kills clients, rewrites a header jobs pre-include and
has clients fork children that compile. Every job gets exactly one result or a
typed error that fits it, every binary equals a reference compile, memory stays flat,
and nothing is left at the end (the soak checks all that and exits 1 otherwise)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .kernels import needs_nvcc
from .processes import REPO

pytestmark = [
    pytest.mark.slow,
    needs_nvcc,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="no redis-server"),
]

#: Every chaos kind of the soak (benchmarks/server/soak.py's CHAOS).
CHAOS = {
    "server", "nvrtc_worker", "nvcc", "redis", "client_stop", "client_kill", "header", "fork",
}  # fmt: skip


@pytest.mark.timeout(1200)
def test_twenty_thousand_jobs_under_chaos_are_each_answered_once_and_leave_nothing(
    tmp_path: Path,
) -> None:
    out = tmp_path / "soak.json"
    argv = [sys.executable, "-m", "benchmarks.server.soak", "--jobs", "20000"]
    argv += ["--clients", "2", "--chaos-interval", "1", "--max-seconds", "900"]
    done = subprocess.run(
        [*argv, "--json", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=1100,
        check=False,
    )
    said = done.stdout[-6000:] + done.stderr[-3000:]
    assert done.returncode == 0, said
    result = json.loads(out.read_text())
    assert result["violations"] == [], said
    assert (result["recorded"], result["lost"], result["duplicated"]) == (20000, 0, 0)
    # Each kind of chaos really struck, at least once.
    assert set(result["chaos"]) == CHAOS
    assert all(count >= 1 for count in result["chaos"].values()), result["chaos"]
    assert result["resubmitted"] > 0  # a killed client's jobs went to a fresh one
    # Each kind of job got its own answer somewhere (on both compilers), and the Redis
    # tier served hits (after a server was killed and its disk cache emptied).
    outcomes = result["outcomes"]
    for expected in ("hit nvrtc ok", "hit nvcc ok", "miss nvrtc ok", "fail nvrtc CompileError"):
        assert outcomes.get(expected, 0) > 0, outcomes
    assert outcomes.get("timeout nvrtc CompileTimeout", 0) > 0, outcomes
    # Issue 37's faults: nvJitLink links in the server's worker processes, a link that
    # wedges nvJitLink is its own CompileError and nothing more, an options file is
    # refused as the job is built, a pre-included header rewritten by the chaos never
    # gives a stale binary, and a client's forked children each compile and exit.
    for expected in (
        "ptx_hit nvjitlink ok",
        "ptx_miss nvjitlink ok",
        "wedge nvjitlink CompileError",
        "refused nvrtc InvalidJob",
        "header nvrtc ok",
    ):
        assert outcomes.get(expected, 0) > 0, outcomes
    assert result["nvjitlink_server_workers"] > 0
    header = result["header"]
    assert header["versions"] > 1 and header["checked"] > 0 and header["stale"] == 0, header
    forks = result["forks"]
    assert forks["made"] > 0 and forks["problems"] == [] and forks["orphaned"] == 0, forks
    assert result["server_cache"]["remote_hits"] > 0, result["server_cache"]
    assert result["left"] == {"processes": [], "folders": [], "sockets": []}
    # Memory was judged (flat: no violation) for the clients and a server.
    judged = [name for name, trend in result["memory"].items() if trend["judged"]]
    assert any(n.startswith("server") for n in judged), result["memory"]
    assert any(n.startswith("client") for n in judged), result["memory"]
