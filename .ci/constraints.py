"""Write pip constraints that pin every dependency to the floor ``pyproject.toml`` declares.

Each requirement of ``[project] dependencies`` and of the chosen extras must
carry a lower bound ``>=``; it becomes ``name==floor``. A name met in several
groups gets its highest floor. A requirement without a floor is an error, so a
dependency cannot be added without a tested minimum (docs/versions.md).

Usage: ``python .ci/constraints.py [--extra NAME ...] [--pyproject PATH]``
(the ``test`` extra by default); the lines go to standard output.
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# name, optional [extras], specifiers; markers (after ';') are not used by this project
_REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([^;]*?)\s*(;.*)?$")


def canonical(name: str) -> str:
    """The normalised project name (PEP 503): lower case, runs of ``-_.`` as one ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def floor_of(requirement: str) -> tuple[str, str]:
    """``(canonical name, floor)`` of one requirement string such as ``"dask[distributed]>=2024.1"``.

    Raises
    ------
    ValueError
        When the requirement cannot be read or has no ``>=`` lower bound.
    """
    match = _REQUIREMENT.match(requirement)
    if match is None:
        raise ValueError(f"requirement={requirement!r} cannot be read")
    name, _, specifiers, marker = match.groups()
    if marker:
        raise ValueError(f"requirement={requirement!r}: environment markers are not supported")
    floors = [part.strip()[2:].strip() for part in specifiers.split(",") if part.strip().startswith(">=")]
    if len(floors) != 1 or not floors[0]:
        raise ValueError(f"requirement={requirement!r} must have exactly one lower bound '>='")
    return canonical(name), floors[0]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def floors(pyproject: dict, extras: list[str]) -> dict[str, str]:
    """``{name: floor}`` over the base dependencies and ``extras`` (the highest floor of a repeated name)."""
    project = pyproject["project"]
    optional = project.get("optional-dependencies", {})
    unknown = [extra for extra in extras if extra not in optional]
    if unknown:
        raise ValueError(f"extra={unknown[0]!r} is not in [project.optional-dependencies] "
                         f"(one of {sorted(optional)})")
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements.extend(optional[extra])
    out: dict[str, str] = {}
    for requirement in requirements:
        name, floor = floor_of(requirement)
        if name not in out or _version_key(floor) > _version_key(out[name]):
            out[name] = floor
    return out


def constraints(pyproject: dict, extras: list[str]) -> str:
    """The constraints file's text: one ``name==floor`` line a dependency, sorted by name."""
    return "".join(f"{name}=={floor}\n" for name, floor in sorted(floors(pyproject, extras).items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extra", action="append", default=None,
                        help="an extra whose requirements are pinned too (repeatable; default: test)")
    parser.add_argument("--pyproject", type=Path, default=ROOT / "pyproject.toml")
    args = parser.parse_args(argv)
    with args.pyproject.open("rb") as handle:
        pyproject = tomllib.load(handle)
    try:
        text = constraints(pyproject, args.extra if args.extra is not None else ["test"])
    except ValueError as error:
        print(f"constraints: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
