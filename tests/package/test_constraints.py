"""The floors CI installs are the floors pyproject.toml declares (.ci/constraints.py, docs/versions.md)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load():
    spec = importlib.util.spec_from_file_location("ci_constraints", ROOT / ".ci" / "constraints.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


constraints = _load()
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _names(requirements: list[str]) -> set[str]:
    return {constraints.canonical(re.match(r"[A-Za-z0-9._-]+", r).group()) for r in requirements}


def test_todays_pyproject_gives_one_pin_per_dependency_at_its_floor():
    project = PYPROJECT["project"]
    expected = _names(project["dependencies"]) | _names(project["optional-dependencies"]["test"])
    pins = dict(line.split("==") for line in constraints.constraints(PYPROJECT, ["test"]).splitlines())
    assert set(pins) == expected  # every dependency, nothing else
    assert pins["numpy"] == "1.26" and pins["dask"] == "2024.1" and pins["scikit-learn"] == "1.3"
    # each pin is the number after '>=' in pyproject.toml for that name
    for requirement in project["dependencies"] + project["optional-dependencies"]["test"]:
        name, floor = constraints.floor_of(requirement)
        assert pins[name] == floor


def test_every_extra_has_floors_and_a_repeated_name_takes_the_highest():
    every = list(PYPROJECT["project"]["optional-dependencies"])
    pins = constraints.floors(PYPROJECT, every)
    assert "opacus" in pins and "opendp" in pins
    toy = {"project": {"dependencies": ["a>=1.2"], "optional-dependencies": {"x": ["A>=1.10,<2"], "y": ["b_c>=3"]}}}
    assert constraints.floors(toy, ["x", "y"]) == {"a": "1.10", "b-c": "3"}


@pytest.mark.parametrize("requirement", ["numpy", "numpy<2", "numpy>=1,>=2", "numpy>=1; python_version<'3.12'"])
def test_a_requirement_without_one_floor_is_refused(requirement):
    with pytest.raises(ValueError, match="requirement="):
        constraints.floor_of(requirement)


def test_the_script_writes_the_file_and_refuses_an_unknown_extra():
    done = subprocess.run([sys.executable, str(ROOT / ".ci" / "constraints.py")], capture_output=True, text=True,
                          check=True)
    assert "torch==2.13\n" in done.stdout and "pytest==8\n" in done.stdout
    refused = subprocess.run([sys.executable, str(ROOT / ".ci" / "constraints.py"), "--extra", "nope"],
                             capture_output=True, text=True)
    assert refused.returncode == 2 and "extra='nope'" in refused.stderr and "\n" == refused.stderr[-1]


def test_the_floor_subset_lists_test_files_that_exist():
    listed = [line.strip() for line in (ROOT / ".ci" / "floor-tests.txt").read_text(encoding="utf-8").splitlines()
              if line.strip() and not line.startswith("#")]
    assert listed and all((ROOT / path).is_file() for path in listed)
    # one test folder at least for each layer of the package
    for folder in ("tests/accounting", "tests/mechanisms", "tests/attacks", "tests/audit", "tests/reports",
                   "tests/package"):
        assert any(path.startswith(folder + "/") for path in listed), folder


def test_the_versions_page_states_the_floors_pyproject_declares():
    """docs/versions.md's table of the two ends gives, for every base dependency, the floor CI installs."""
    page = (ROOT / "docs" / "versions.md").read_text(encoding="utf-8")
    table = page[page.index("## The two ends"):page.index("## Floors that were raised")]
    stated = {constraints.canonical(name): floor
              for name, floor in re.findall(r"^\| ([A-Za-z0-9._-]+) \| ([0-9][0-9.]*) \|", table, re.M)}
    pins = constraints.floors(PYPROJECT, [])
    assert set(pins) <= set(stated), set(pins) - set(stated)
    assert {name: stated[name] for name in pins} == pins
    raised = page[page.index("## Floors that were raised"):]
    for name, now in re.findall(r"^\| ([A-Za-z0-9._-]+) \| [0-9][0-9.]* \| ([0-9][0-9.]*) \|", raised, re.M):
        assert constraints.floors(PYPROJECT, list(PYPROJECT["project"]["optional-dependencies"])).get(
            constraints.canonical(name)) == now, name
