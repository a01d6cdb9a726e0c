"""Test-suite configuration: pytester for the plugin tests, and the longest files first."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]

#: The files that took 40 s or more of one core in the README's run (2026-11-28, in this order): started first,
#: so that no worker is left alone with one of them at the end while the other idles. pytest-randomly's order is
#: kept for every other file and for the tests within each file.
LONGEST_FIRST = (
    "tests/statistical/test_families.py",
    "tests/mechanisms/test_models.py",
    "tests/audit/jobs/test_runner.py",
    "tests/package/test_distribution.py",
    "tests/attacks/test_discrete.py",
    "tests/statistical/test_one_run.py",
    "tests/package/test_gallery.py",
    "tests/audit/checks/test_zoo_dpsgd.py",
    "tests/statistical/test_discrete_power.py",
    "tests/statistical/test_white_box.py",
)


@pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: place for place, name in enumerate(LONGEST_FIRST)}

    def place(item: pytest.Item) -> int:
        try:
            return rank.get(Path(item.path).resolve().relative_to(ROOT).as_posix(), len(rank))
        except ValueError:  # a file outside the repository (pytester's)
            return len(rank)
    items.sort(key=place)  # stable: every other item keeps its place
