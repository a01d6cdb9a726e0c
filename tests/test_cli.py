"""The command line: JSON output, one-line errors and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

from dpaudit.cli import main


def test_list_json_names_every_mechanism(capsys):
    assert main(["list", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    names = {entry["name"] for entry in document["mechanisms"]}
    assert {"gaussian", "laplace", "projected-kernel", "pnsgd", "multi-epoch-pnsgd",
            "dp-sgd", "dp-lssgd", "shuffled-rr"} <= names
    pnsgd = next(e for e in document["mechanisms"] if e["name"] == "pnsgd")
    params = {p["name"]: p for p in pnsgd["params"]}
    assert params["sigma"]["default"] == 1.0 and params["variant"]["doc"]


def test_list_text(capsys):
    assert main(["list"]) == 0
    assert "pnsgd" in capsys.readouterr().out


def test_bad_command_exits_2_with_one_line():
    result = subprocess.run([sys.executable, "-m", "dpaudit", "frobnicate"],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "invalid choice: 'frobnicate'" in result.stderr
    assert "Traceback" not in result.stderr


def test_index_all_needs_records_in_order(capsys):
    # shuffled-rr has n users but no order after the shuffle: per-index claims do not exist
    assert main(["bound", "shuffled-rr", "--set", "n=20", "--delta", "1e-5", "--index", "all"]) == 2
    assert "needs a mechanism with records in a fixed order" in capsys.readouterr().err
