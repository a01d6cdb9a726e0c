"""The throughput check's verdicts, on saved measurements (nothing is timed here)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _check_module():
    spec = importlib.util.spec_from_file_location("check_throughput", ROOT / "benchmarks" / "check_throughput.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _results(tmp_path: Path, ratios: dict[str, float]) -> Path:
    path = tmp_path / "run.json"
    rows = [{"name": name, "ratio_to_floor": value, "ratio_to_floor_range": [value, value], "rounds": 5,
             "trials": 50_000} for name, value in ratios.items()]
    path.write_text(json.dumps({"benchmark": "throughput", "results": rows}))
    return path


def test_the_recorded_ratios_cover_every_case_and_are_plausible():
    check = _check_module()
    record = check.load_record(check.RATIOS)
    cases = ("pnsgd-linear-ball", "pnsgd-logistic-ball", "multi-epoch-pnsgd", "dp-lssgd", "projected-kernel")
    assert set(record["ratios"]) == set(cases) and record["tolerance"] == pytest.approx(0.10)
    assert all(0 < value <= 1.2 for value in record["ratios"].values())


def test_a_case_more_than_ten_percent_below_its_record_fails(tmp_path, capsys):
    check = _check_module()
    record = tmp_path / "ratios.json"
    record.write_text(json.dumps({"tolerance": 0.1, "ratios": {"a": 0.80, "b": 0.50}}))
    # 0.73 is within 10% of 0.80 (bound 0.72); 0.449 is more than 10% below 0.50 (bound 0.45)
    assert check.main(["--from-json", str(_results(tmp_path, {"a": 0.73, "b": 0.60})), "--ratios", str(record)]) == 0
    assert check.main(["--from-json", str(_results(tmp_path, {"a": 0.95, "b": 0.449})), "--ratios", str(record)]) == 1
    assert "b more than 10% below" in capsys.readouterr().err
    # a recorded case that was not measured, or an unreadable record: a usage error
    assert check.main(["--from-json", str(_results(tmp_path, {"a": 0.9})), "--ratios", str(record)]) == 2
    assert check.main(["--from-json", str(_results(tmp_path, {"a": 0.9})), "--ratios", str(tmp_path / "no")]) == 2
