from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The team's key and a real Redis, for every module (the key is set per test, by
# monkeypatch: a remote tier's test asks for it, and no other test sees it).
from asynccomp.backends._nvrtc_pch_hints import AHEAD_ENV
from asynccomp.workers import SHARED_TEMPLATES_ENV

from .ray_cluster import short_ray_tmpdir
from .redis_server import redis_server, team_key
from .user_dirs import UserDirs

__all__ = ("redis_server", "team_key")

#: The user's folders as this process found them (``None``: its parent redirected them).
_USER_DIRS_KEY = pytest.StashKey[UserDirs | None]()
_WRITTEN_KEY = pytest.StashKey[list[str]]()
#: $ASYNCCOMP_SERVER as this process found it.
_SERVER_SETTING_KEY = pytest.StashKey[str | None]()
#: $ASYNCCOMP_SHARED_TEMPLATES as this process found it.
_SHARING_KEY = pytest.StashKey[str | None]()
_AHEAD_KEY = pytest.StashKey[str | None]()
#: Ray's temporary folder this process made for the session (``None``: none needed).
_RAY_TMPDIR_KEY = pytest.StashKey[Path | None]()


def pytest_configure(config: pytest.Config) -> None:
    """Before any test (or test module) runs: the user's cache and config folders are
    the session's own (tests/user_dirs.py), whatever a test starts and with whichever
    copy of the environment; no compile server unless a test starts one (the doctests
    in asynccomp/ too, which tests/'s fixtures do not reach: the TVM facade's would
    start one in the user's own server folder, or use the user's, and its cache); and
    Ray's temporary folder is short enough for its sockets where ``$TMPDIR`` is not."""
    config.stash[_USER_DIRS_KEY] = UserDirs.redirect()
    config.stash[_SERVER_SETTING_KEY] = os.environ.get("ASYNCCOMP_SERVER")
    os.environ["ASYNCCOMP_SERVER"] = "off"
    # No template outlives the test that started it (tests/test_shared_templates.py
    # turns sharing on for its own processes).
    config.stash[_SHARING_KEY] = os.environ.get(SHARED_TEMPLATES_ENV)
    os.environ[SHARED_TEMPLATES_ENV] = "off"
    # Nor does a PCH hint reach another test's server (tests/test_pch_hints.py turns
    # making them ahead on for its own).
    config.stash[_AHEAD_KEY] = os.environ.get(AHEAD_ENV)
    os.environ[AHEAD_ENV] = "off"
    ray_tmpdir = short_ray_tmpdir()
    config.stash[_RAY_TMPDIR_KEY] = ray_tmpdir
    if ray_tmpdir is not None:
        os.environ["RAY_TMPDIR"] = str(ray_tmpdir)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The session fails if anything it ran wrote into the user's real asynccomp
    folders, naming what (reported by :func:`pytest_terminal_summary`)."""
    dirs = session.config.stash.get(_USER_DIRS_KEY, None)
    if dirs is None:
        return
    written = dirs.written()
    session.config.stash[_WRITTEN_KEY] = written
    if written:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    written = config.stash.get(_WRITTEN_KEY, [])
    if written:
        terminalreporter.write_sep(
            "=", "the tests wrote into the user's real asynccomp folders", red=True
        )
        for line in written:
            terminalreporter.write_line(line)


def pytest_unconfigure(config: pytest.Config) -> None:
    settings = (
        (_SERVER_SETTING_KEY, "ASYNCCOMP_SERVER"),
        (_SHARING_KEY, SHARED_TEMPLATES_ENV),
        (_AHEAD_KEY, AHEAD_ENV),
    )
    for key, name in settings:
        setting = config.stash.get(key, None)
        if setting is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = setting
    dirs = config.stash.get(_USER_DIRS_KEY, None)
    if dirs is not None:
        dirs.restore()
    ray_tmpdir = config.stash.get(_RAY_TMPDIR_KEY, None)
    if ray_tmpdir is not None:
        os.environ.pop("RAY_TMPDIR", None)
        shutil.rmtree(ray_tmpdir, ignore_errors=True)


@pytest.fixture(autouse=True, scope="session")
def this_checkout_in_subprocesses() -> Iterator[None]:
    """``python -m asynccomp`` in a test's subprocess imports this checkout's package,
    the one under test, not whichever one the environment installed (a second worktree
    shares the first one's editable install: its subprocesses ran the other code)."""
    from asynccomp._os import python_path

    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = python_path()
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


@pytest.fixture(autouse=True)
def private_cache_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """Each test gets an empty disk cache, so results never leak between tests (or in
    from the user's own cache)."""
    path = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("ASYNCCOMP_CACHE_DIR", str(path))
    yield path


@pytest.fixture(autouse=True)
def no_facade_engine_left() -> Iterator[None]:
    """A test that compiled through the TVM facade leaves its process-wide engine (and
    its NVRTC worker) running, as a TVM process would: close it, so that the next test
    sees only the processes it starts."""
    yield
    import asynccomp.tvm

    asynccomp.tvm.shutdown()


@pytest.fixture(autouse=True, scope="session")
def private_server_dir() -> Iterator[Path]:
    """Compile servers the tests start live in a folder of the test session's (short:
    a socket's path is limited to about 100 bytes), and are stopped at its end. The TVM
    facade compiles in-process unless a test asks for the server."""
    from .servers import server_folder

    saved = {k: os.environ.get(k) for k in ("ASYNCCOMP_SERVER_DIR", "ASYNCCOMP_SERVER")}
    try:
        with server_folder() as folder:
            os.environ["ASYNCCOMP_SERVER_DIR"] = str(folder)
            os.environ["ASYNCCOMP_SERVER"] = "off"
            yield folder
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(autouse=True, scope="session")
def no_server_folder_left() -> Iterator[None]:
    """Every server folder a test makes (``acs-<pid>-*``) is removed by the test, pass
    or fail: the session fails, naming them, if any is left. One there before the
    session began is another process's that had this pid (pids are reused: 32,768 of
    them here) and was killed before it could remove it: removed first (its servers
    stopped), so that the check judges this session's own."""
    from .servers import ROOT, folder_prefix, stop_servers_in

    for stale in ROOT.glob(f"{folder_prefix()}*"):
        stop_servers_in(stale)
        shutil.rmtree(stale, ignore_errors=True)
    yield
    left = sorted(str(p) for p in ROOT.glob(f"{folder_prefix()}*"))
    assert left == [], f"the tests left these server folders behind: {left}"


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Every coroutine test (anyio's plugin in auto mode: pyproject.toml) runs on both
    event loops anyio runs on: the engine, the server and the workers are tested on
    asyncio and on trio. A test of what only asyncio has says
    ``@pytest.mark.asyncio_only`` (its trio run is left out)."""
    return str(request.param)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    left_out = [
        item
        for item in items
        if item.get_closest_marker("asyncio_only") is not None and item.name.endswith("[trio]")
    ]
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if item not in left_out]


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: two test processes on two cores, up to four on more. Each test's
    engines start their own workers (one per CPU), so more test processes than this only
    share the same cores; most tests wait on compilers and processes, which overlaps."""
    return max(1, min(4, os.cpu_count() or 1))


#: Files whose tests start or look for Ray processes anywhere on the machine (actors found
#: by their process titles, "a Ray cluster runs here", ``--ray auto``).
_RAY_FILES = frozenset({"test_ray.py", "test_ray_unreachable.py", "test_no_cli_copies.py"})


def _scope(nodeid: str) -> str:
    """The unit of tests one test process runs together: every Ray test in one ("ray"),
    one after another, any other test on its own. In other files a Ray test says so in
    its name (``test_ray_...``) or its parameters (a door ``-ray``, "a Ray executor",
    the manual's Ray guide ``ray.md``)."""
    path, _, rest = nodeid.partition("::")
    name = rest.split("[", 1)[0]
    if (
        path.rsplit("/", 1)[-1] in _RAY_FILES
        or "ray" in name.split("_")
        or re.search(r"-ray\]|\bRay\b|/ray\.md", rest)
    ):
        return "ray"
    return nodeid


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Tests spread as they come, but the Ray ones stay together (pytest-xdist's own
    ``--dist loadgroup`` does not group under pytest 9.2: it renames node ids, which
    pytest no longer reads back)."""
    from xdist.scheduler import LoadScopeScheduling

    class RayTogether(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    return RayTogether(config, log)
