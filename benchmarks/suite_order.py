"""Record how long each test file takes, for the order in which the suite hands files to its workers.

Run: ``python -m pytest -q --junitxml=suite.xml`` then ``python benchmarks/suite_order.py suite.xml``: writes
``tests/file_seconds.json`` (seconds per test file, setup and teardown included, rounded to 0.1 s), which
``tests/conftest.py`` reads to give the longest files out first (docs/versions.md, "The suite's time").
Commit it when files have grown or shrunk by much.

Under pytest-xdist each file goes whole to one worker (``--dist loadfile``), so a long file handed out last
runs alone while the other worker idles. Handing files out longest first bounds that idle tail by the
shortest files. The record only orders: a stale or missing entry changes when a file starts, never what it
tests (a file not in the record counts as ``tests/conftest.py``'s ``UNKNOWN_SECONDS``).
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import Path

RECORD = Path(__file__).resolve().parents[1] / "tests" / "file_seconds.json"


def file_seconds(junit_xml: Path) -> dict[str, float]:
    """``{test file path: seconds}`` summed over the testcases of a JUnit XML report (pytest's ``--junitxml``)."""
    seconds: Counter = Counter()
    for case in ElementTree.parse(junit_xml).iter("testcase"):
        parts = [part for part in case.get("classname", "").split(".") if part]  # "" for a file skipped whole
        while parts and parts[-1][:1].isupper():  # a test class: the file is the module above it
            parts.pop()
        if parts:
            seconds["/".join(parts) + ".py"] += float(case.get("time", 0.0))
    return {name: round(value, 1) for name, value in sorted(seconds.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit_xml", type=Path, help="pytest's --junitxml report of a whole run")
    parser.add_argument("--out", type=Path, default=RECORD, help=f"where to write (default {RECORD})")
    args = parser.parse_args(argv)
    if not args.junit_xml.is_file():
        print(f"error: junit_xml: no such file: {args.junit_xml}", file=sys.stderr)
        return 2
    record = file_seconds(args.junit_xml)
    if not record:
        print(f"error: junit_xml: {args.junit_xml} holds no testcase", file=sys.stderr)
        return 2
    args.out.write_text(json.dumps(record, indent=0) + "\n", encoding="utf-8")
    print(f"wrote {args.out}: {len(record)} files, {sum(record.values()):.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
