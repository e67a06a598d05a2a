from __future__ import annotations

import asynccomp
from asynccomp.examples import example_names, example_path, example_sources


def test_all_matches_exports() -> None:
    exported = {name for name in dir(asynccomp) if not name.startswith("_")}
    modules = {name for name in exported if type(getattr(asynccomp, name)).__name__ == "module"}
    assert set(asynccomp.__all__) == exported - modules - {"annotations"}
    assert list(asynccomp.__all__) == sorted(asynccomp.__all__)


def test_examples_ship_with_the_package() -> None:
    names = example_names()
    assert len(names) >= 6
    assert all(example_path(name).is_file() for name in names)
    assert all("__global__" in source for _, source in example_sources())
