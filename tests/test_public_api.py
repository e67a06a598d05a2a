"""The public API: every public module says what it exports (``__all__``), sorted, and
exports everything it defines."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import ModuleType

import pytest

import asynccomp
from asynccomp.examples import example_names, example_path, example_sources


def _public_modules() -> list[str]:
    names = ["asynccomp"]
    for info in pkgutil.walk_packages(asynccomp.__path__, "asynccomp."):
        parts = info.name.split(".")
        if any(part.startswith("_") for part in parts) or parts[1] == "examples":
            continue
        names.append(info.name)
    return names


PUBLIC = _public_modules()


def test_the_public_modules_are_the_documented_ones() -> None:
    assert {"asynccomp.engine", "asynccomp.cache", "asynccomp.backends", "asynccomp.tvm"} <= set(
        PUBLIC
    )
    assert not [name for name in PUBLIC if "._" in name]


@pytest.mark.parametrize("name", PUBLIC)
def test_all_is_sorted_complete_and_true(name: str) -> None:
    module: ModuleType = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert list(exported) == sorted(exported), f"{name}.__all__ is not sorted"
    assert len(set(exported)) == len(exported)
    missing = [item for item in exported if not hasattr(module, item)]
    assert missing == [], f"{name}.__all__ names what it does not have"
    # Every public class and function defined here is exported.
    defined = [
        item
        for item, value in vars(module).items()
        if not item.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", None) == name
    ]
    assert sorted(set(defined) - set(exported)) == [], f"{name} defines but does not export"


def test_package_all_matches_exports() -> None:
    exported = {name for name in dir(asynccomp) if not name.startswith("_")}
    modules = {name for name in exported if inspect.ismodule(getattr(asynccomp, name))}
    assert set(asynccomp.__all__) == exported - modules - {"annotations"}


def test_examples_ship_with_the_package() -> None:
    names = example_names()
    assert len(names) >= 6
    assert all(example_path(name).is_file() for name in names)
    assert all("__global__" in source for _, source in example_sources())
