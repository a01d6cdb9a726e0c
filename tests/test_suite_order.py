"""The record of seconds per test file that orders the suite's files (benchmarks/suite_order.py, tests/conftest.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from tests.conftest import FILE_SECONDS

ROOT = Path(__file__).resolve().parents[1]

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">
<testcase classname="tests.a.test_one" name="test_x" time="1.25"/>
<testcase classname="tests.a.test_one" name="test_y" time="0.5"/>
<testcase classname="tests.a.test_two.TestGroup" name="test_z" time="2.0"/>
<testcase classname="" name="tests.a.test_skipped" time="0.0"><skipped message="optional extra"/></testcase>
</testsuite></testsuites>"""


def _module():
    spec = importlib.util.spec_from_file_location("suite_order", ROOT / "benchmarks" / "suite_order.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_seconds_are_summed_per_file_with_classes_folded_into_their_file(tmp_path):
    (tmp_path / "run.xml").write_text(JUNIT)
    assert _module().file_seconds(tmp_path / "run.xml") == {"tests/a/test_one.py": 1.8, "tests/a/test_two.py": 2.0}


def test_the_script_refuses_a_missing_or_empty_report_naming_it(tmp_path, capsys):
    module = _module()
    assert module.main([str(tmp_path / "none.xml"), "--out", str(tmp_path / "o.json")]) == 2
    (tmp_path / "empty.xml").write_text("<testsuites/>")
    assert module.main([str(tmp_path / "empty.xml"), "--out", str(tmp_path / "o.json")]) == 2
    assert capsys.readouterr().err.count("error: junit_xml:") == 2 and not (tmp_path / "o.json").exists()


def test_the_record_names_test_files_that_exist_and_most_of_them():
    files = {str(path.relative_to(ROOT)) for path in (ROOT / "tests").rglob("test_*.py")}
    assert set(FILE_SECONDS) <= files, sorted(set(FILE_SECONDS) - files)
    assert len(FILE_SECONDS) >= 0.8 * len(files), "the record is stale: run benchmarks/suite_order.py on a new run"
