from __future__ import annotations

import pytest

from asynccomp.toolkit import find_toolkit


@pytest.fixture(scope="session")
def has_nvcc() -> bool:
    return find_toolkit().nvcc is not None


@pytest.fixture
def need_nvcc(has_nvcc: bool) -> None:
    if not has_nvcc:
        pytest.skip("nvcc not found (install a CUDA toolkit or nvidia-cuda-nvcc)")
