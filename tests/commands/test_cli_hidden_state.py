"""The command line with scheduled canaries and losses of the user's own: a run, and one-line errors."""

from __future__ import annotations

import json
import math

import pytest

from dpaudit.cli import main
from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon

DP_SGD = '[mechanism]\nname = "dp-sgd"\nn = 100\nbatch_size = 100\nsteps = 250\nnoise_std = 0.1581\n'
LOSSES = '''import torch


def grad(w, record):
    return w - record


def flat(w, record):
    return w.sum(-1)
'''


def test_every_5_runs_and_reports_the_closed_form(tmp_path, capsys):
    config = tmp_path / "every5.toml"
    config.write_text(DP_SGD + "[canary]\nevery = 5\n[audit]\ntrials = 2000\n")
    assert main(["run", str(config), "--store", str(tmp_path / "s.sqlite"), "--workers", "1", "--quiet",
                 "--json", "--out", str(tmp_path / "out")]) == 0
    document = json.loads(capsys.readouterr().out)
    report = (tmp_path / "out" / f"{document['audit_id']}.md").read_text()
    assert "inserted every 5 steps" in report and "scheduled-amplification" in report
    claims = {claim["name"]: claim for claim in document["claims"]}
    delta = document["audit"]["delta"]
    z = 0.1581 * 100
    assert abs(claims["exact-instance"]["epsilon"] - float(gaussian_epsilon(delta, math.sqrt(250) / (5 * z)))) < 1e-6
    every_iterate = float(gaussian_epsilon(delta, math.sqrt(50) / z))
    assert abs(claims["scheduled-composition"]["epsilon"] - every_iterate) < 1e-6
    assert claims["exact-instance"]["epsilon"] < every_iterate
    assert document["canary"]["every"] == 5 and document["canary"]["relation"] == "zero-out"
    assert document["empirical"]["epsilon_lower_bound"] <= claims["scheduled-composition"]["epsilon"]


@pytest.mark.parametrize("canary, expected", [
    ("steps = [300]", "[canary] canary steps: step 300 is beyond the run, whose steps are 1..250"),
    ("every = 0", "[canary] canary every must be an integer >= 1, got every=0"),
    ("every = 5\ndirections = [[1.0, 0.0]]", "[canary] canary directions must give one direction per scheduled step"),
    ("steps = [1]\ndirections = [[1.0, 0.0]]", "[canary] canary directions: direction 1 must have 1 number"),
    ("every = 5\nfrequency = 2", "[canary] frequency: unknown key (valid: every, steps, directions, target, kind"),
])
def test_a_bad_schedule_exits_2_with_one_line_naming_it(tmp_path, capsys, canary, expected):
    config = tmp_path / "bad.toml"
    config.write_text(DP_SGD + "[canary]\n" + canary + "\n")
    assert main(["run", str(config), "--store", str(tmp_path / "s.sqlite"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("loss, expected", [
    ("missing.py:grad", "[mechanism] loss: no such file"),
    ("losses.py:nothing", "[mechanism] loss: "),
    ("losses.py:flat", "returned shape (2,) for iterates of shape (2, 1)"),
])
def test_a_bad_loss_file_exits_2_with_one_line_naming_it(tmp_path, capsys, loss, expected):
    (tmp_path / "losses.py").write_text(LOSSES)
    config = tmp_path / "bad.toml"
    config.write_text(f'[mechanism]\nname = "dp-sgd"\nloss = "{loss}"\n')
    assert main(["run", str(config), "--store", str(tmp_path / "s.sqlite"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert expected in err and loss in err  # the key and the value the user wrote
    assert err.count("\n") == 1 and "Traceback" not in err
    if "nothing" in loss:
        assert "has no name 'nothing'" in err
