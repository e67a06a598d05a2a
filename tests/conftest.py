from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def private_cache_dir(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Path]:
    """Each test gets an empty disk cache, so results never leak between tests (or in
    from the user's own cache)."""
    path = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("ASYNCCOMP_CACHE_DIR", str(path))
    yield path
