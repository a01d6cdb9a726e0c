"""``dpaudit plan``: the trials at which the ceiling reaches a fraction of the exact value."""

from __future__ import annotations

import json

import pytest

from dpaudit.auditing.statistics.ceiling import exact_ceiling
from dpaudit.cli import main
from dpaudit.mechanisms.accounting.last_iterate import count_mixture

CONFIG = """
title = "small dp-sgd"
[mechanism]
name = "dp-sgd"
n = 20
dim = 2
batch_size = 2
steps = 10
eta = 0.5
noise_std = 0.5
sampling = "poisson"
[canary]
kind = "gradient"
pair = "zero"
[audit]
trials = 20000
delta = 1e-5
"""


def test_plan_finds_the_trials_where_the_ceiling_reaches_the_target(tmp_path, capsys):
    path = tmp_path / "small.toml"
    path.write_text(CONFIG)
    assert main(["plan", str(path), "--target", "0.6", "--json", "--progress"]) == 0
    shown = capsys.readouterr()
    assert "planning" in shown.err  # progress forced on (stderr is no terminal under pytest)
    (document,) = json.loads(shown.out)
    (row,) = document["positions"]
    # the same instance by hand: Y = K / 2 + N(0, 10 * 0.25), K ~ Binom(10, 0.1)
    laws = count_mixture(0.5, 0.0, steps=10, rate=0.1, std=0.5 * 10**0.5)
    assert row["value_kind"] == "exact" and row["value"] == pytest.approx(laws.epsilon(1e-5), rel=1e-9)
    law, goal = laws.likelihood_ratio_law(), 0.6 * row["value"]
    needed = row["trials_for_target"]
    certification = needed - int(-(-0.1 * needed // 1))  # what calibration leaves (ceil of 10%)
    assert exact_ceiling(*law, trials=certification, delta=1e-5, confidence=0.95) >= goal
    # to 1%: two percent fewer trials fall short
    assert exact_ceiling(*law, trials=int(0.98 * certification), delta=1e-5, confidence=0.95) < goal


def test_plan_refuses_a_target_outside_zero_one(tmp_path, capsys):
    path = tmp_path / "small.toml"
    path.write_text(CONFIG)
    assert main(["plan", str(path), "--target", "1.5"]) == 2
    assert "target must be a fraction in (0, 1), got target=1.5" in capsys.readouterr().err


MODEL = """
title = "softmax, one run"
[mechanism]
name = "model"
model = "softmax"
data = "iris"
steps = 10
batch_size = 16
noise_multiplier = 1.0
[canary]
kind = "gradient"
[audit]
design = "one-run"
canaries = 100
"""


def test_plan_compares_many_trainings_with_one_run_for_a_model(tmp_path, capsys):
    path = tmp_path / "model.toml"
    path.write_text(MODEL)
    assert main(["plan", str(path), "--target", "0.5", "--json", "--draws", "5"]) == 0
    (document,) = json.loads(capsys.readouterr().out)
    many, one = document["designs"]["many-runs"], document["designs"]["one-run"]
    value = max(row["value"] for row in document["positions"])
    assert many["trainings"] == 2 * 100_000 and 0 < many["ceiling"] < value
    assert one["canaries"] == 100 and one["trainings"] == 1 and one["draws"] == 5 and one["laws"] == "position"
    assert set(one["certifiable"]) == {"fdp", "steinke", "tail"}
    # the forecast's canaries are drawn from the position's laws, of epsilon `value`: a sound estimator
    # certifies no more (each draw with probability 0.95, so the median of five almost surely)
    assert all(0 <= bound <= value for bound in one["certifiable"].values())
    assert all(low <= one["certifiable"][method] <= high for method, (low, high) in one["bands"].items())
    # the canary choices: the same figure, told apart by how much the other canaries' gradients weigh
    choices = {row["choice"]: row for row in one["choices"]}
    assert set(choices) == {"gradient, dirac", "gradient, random", "input"}
    assert choices["gradient, random"]["configured"] and not choices["gradient, dirac"]["configured"]
    assert choices["gradient, dirac"]["overlap"] == pytest.approx(100 / 15 - 1, abs=0.05)  # 15 parameters
    assert choices["gradient, random"]["overlap"] == pytest.approx(99 / 15)
    assert 0 < choices["gradient, dirac"]["interference_share"] < choices["gradient, random"]["interference_share"]
    assert choices["input"]["overlap"] is None
    assert main(["plan", str(path), "--target", "0.5", "--canaries", "400", "--draws", "3"]) == 0
    out = capsys.readouterr().out
    assert "one run with 400 canaries (1 training), each free of interference and scored by the position's " \
           "own score laws, certifies about fdp" in out
    assert "gradient, random (configured): each score carries 26.6 other canaries' gradients" in out
