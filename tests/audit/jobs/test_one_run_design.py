"""The one-run design: a config, the CLI, Python, the store, check and assert_private."""

from __future__ import annotations

import html
import json
import sqlite3

import numpy as np
import pytest

import dpaudit
from dpaudit.auditing.checks.regression import PrivacyViolation, assert_private
from dpaudit.auditing.jobs.config import load_configs
from dpaudit.auditing.jobs.runner import RunOptions
from dpaudit.cli import main
from dpaudit.reports.formatting import md
from tests.helpers import run_documents

FACTORY = """
from torch import nn


def linear(features, classes):
    return nn.Linear(features, classes)
"""

CONFIG = """
title = "one run of an own module"
[mechanism]
name = "model"
model = "mine.py:linear"
data = "digits"
steps = 20
batch_size = 256
sampling = "poisson"
clip = 1.0
noise_multiplier = 1.0
eta = 1.0
[canary]
kind = "{kind}"
[audit]
{design}
canaries = 1000
{extra}
"""


@pytest.fixture
def one_run_config(tmp_path):
    (tmp_path / "mine.py").write_text(FACTORY)

    def write(kind: str = "gradient", extra: str = "", name: str = "one.toml", design: str = 'design = "one-run"'):
        path = tmp_path / name
        path.write_text(CONFIG.format(kind=kind, extra=extra, design=design))
        return path
    return write


def test_the_cli_runs_a_one_run_config_and_every_report_says_the_same(one_run_config, tmp_path, capsys):
    config = one_run_config()
    out = tmp_path / "reports"
    assert main(["run", str(config), "--store", str(tmp_path / "s.sqlite"), "--json", "--quiet",
                 "--out", str(out)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["audit"]["design"] == "one-run" and document["one_run"]["design"] == "one-run"
    assert document["one_run"]["canaries"] == 1000 and document["canary"]["kind"] == "gradient"
    names = {e["name"]: e["value"] for e in document["empirical"]["estimates"]}
    assert set(names) == {"one-run-fdp", "one-run-steinke", "one-run-tail"}
    assert document["empirical"]["epsilon_lower_bound"] == names["one-run-fdp"]  # the estimator named in advance
    assert any(c["applicable"] for c in document["claims"]) and document["verdict"] in ("consistent", "inconclusive")
    record = document["one_run"]
    words = [record["statement"], *record["assumptions"], record["model_based"]]
    assert "Mahloujifar" in record["statement"] and "not certified" in record["model_based"]
    markdown = (out / f"{document['audit_id']}.md").read_text()
    page = html.unescape((out / f"{document['audit_id']}.html").read_text())
    stored = json.loads((out / f"{document['audit_id']}.json").read_text())["one_run"]
    for sentence in words:
        assert md(sentence) == sentence  # nothing for Markdown to escape: the very same words
        assert sentence in markdown and sentence in page
    assert stored == record


def test_python_audit_in_one_run_with_input_canaries():
    mech = dpaudit.make("model", model="softmax", data="digits", steps=10, batch_size=256, noise_multiplier=1.0,
                        eta=1.0)
    result = dpaudit.audit(mech, design="one-run", canaries=400, canary={"kind": "input"}, seed=3)
    assert result.audit["design"] == "one-run" and result.canary["kind"] == "input"
    assert result.attack["score"] == "canary-loss" and result.one_run["pooled_canaries"] == 400
    gaussian = result.one_run["gaussian_pair"]
    assert gaussian["mu"] is not None and result.empirical.model_based_epsilon == gaussian["epsilon"]
    again = dpaudit.audit(mech, design="one-run", canaries=400, canary={"kind": "input"}, seed=3)
    assert again.to_dict()["one_run"] == result.to_dict()["one_run"]  # the seed decides everything
    with pytest.raises(dpaudit.ParameterError, match="design='one-run' takes no trials"):
        dpaudit.audit(mech, design="one-run", canaries=400, trials=1000)
    with pytest.raises(dpaudit.ParameterError, match="canaries must be"):
        dpaudit.audit(mech, design="one-run", canaries=5000)
    with pytest.raises(dpaudit.ParameterError, match="needs mechanism 'model'"):
        dpaudit.audit(dpaudit.make("gaussian"), design="one-run", canaries=100)


def test_runs_are_stored_and_a_lost_run_is_recomputed_alone(one_run_config, tmp_path):
    configs = load_configs([one_run_config(extra="runs = 2")])
    store = tmp_path / "s.sqlite"
    first = run_documents(configs, RunOptions(store=str(store), progress=False))[0]
    assert first["one_run"]["pooled_canaries"] == 2000 and first["timings"]["chunks_computed"] == 2
    again = run_documents(configs, RunOptions(store=str(store), progress=False))[0]
    assert again["timings"]["chunks_computed"] == 0 and again["timings"]["chunks_reused"] == 2
    with sqlite3.connect(store) as connection:  # a run killed before its second training was stored
        connection.execute("DELETE FROM chunks WHERE chunk = 1 AND side = 'a'")
    resumed = run_documents(configs, RunOptions(store=str(store), progress=False))[0]
    assert resumed["timings"]["chunks_computed"] == 1
    assert resumed["empirical"]["estimates"] == first["empirical"]["estimates"]


@pytest.mark.parametrize("design, extra, message", [
    ('design = "one-run"', "trials = 100", "[audit] trials: does not apply to design = 'one-run'"),
    ('design = "many"', "", "[audit] design: must be one of many-runs, one-run"),
    ('design = "one-run"', "one_run_method = 'magic'", "[audit] one_run_method must be one of"),
    ("", "", "[audit] canaries: applies to design = 'one-run' only"),
])
def test_bad_one_run_keys_exit_2_naming_them(one_run_config, tmp_path, capsys, design, extra, message):
    config = one_run_config(extra=extra, design=design)
    assert main(["run", str(config), "--store", str(tmp_path / "s.sqlite"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_check_and_assert_private_treat_a_one_run_audit_like_any_other(one_run_config, tmp_path):
    assert main(["check", str(one_run_config()), "--store", str(tmp_path / "s.sqlite"), "--quiet"]) == 0
    mech = dpaudit.make("model", model="softmax", data="digits", steps=20, batch_size=256, noise_multiplier=1.0,
                        eta=1.0)
    # the accountant's epsilon here is about 4.9: a claim of 4.9 stands, a claim of 0 is refuted (the
    # certified bound of this seed is 0.12 > 0 at confidence 0.95)
    summary = assert_private(mech, epsilon=4.9, delta=1e-5, design="one-run", canaries=1000)
    assert summary["design"] == "one-run" and 0 < summary["epsilon_lower_bound"] <= 4.9
    with pytest.raises(PrivacyViolation, match="is not \\(0, 1e-05\\)-DP: Certified with confidence 0.95"):
        assert_private(mech, epsilon=0.0, delta=1e-5, design="one-run", canaries=1000)


PLUGIN_TESTS = """
import dpaudit

def _mech():
    return dpaudit.make("model", model="softmax", data="digits", steps=20, batch_size=256, noise_multiplier=1.0,
                        eta=1.0)

def test_claim_that_holds(dp_audit):
    dp_audit(_mech(), epsilon=4.9, delta=1e-5, design="one-run", canaries=1000)

def test_claim_of_zero(dp_audit):
    dp_audit(_mech(), epsilon=0.0, delta=1e-5, design="one-run", canaries=1000)
"""


def test_the_pytest_plugin_runs_one_run_audits(pytester):
    pytester.makepyfile(test_one=PLUGIN_TESTS)
    result = pytester.runpytest("-q", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*PrivacyViolation: *is not (0, 1e-05)-DP: Certified with confidence 0.95*",
                                 "*dpaudit privacy audits*", "ok*test_claim_that_holds*", "VIOLATION*test_claim_of_zero*"])


def test_the_model_based_estimate_never_decides_the_verdict():
    from dpaudit.auditing.checks.designs import AuditOptions, AuditTarget
    from dpaudit.auditing.jobs.one_run_result import one_run_result

    mech = dpaudit.make("model", model="softmax", data="iris", steps=10, batch_size=16, noise_multiplier=1.0)
    job = dpaudit.OneRun(canaries=6).job(AuditTarget(mech), AuditOptions())
    included = np.tile([0, 1], 3)
    scores = 10.0 * included + np.linspace(0, 1, 6)  # two groups far apart: a huge Gaussian-pair estimate
    result = one_run_result(job, scores, included, timings={"seconds": 0.0})
    smallest = min(c.epsilon for c in result.claims if c.is_bound)
    assert result.empirical.model_based_epsilon > 10 * smallest  # the model reads far more than any claim
    assert result.epsilon_lower_bound < smallest  # 6 canaries cannot certify much
    assert result.verdict == "consistent" and not result.violations


@pytest.mark.parametrize("method", ["fdp", "steinke", "tail"])
def test_canaries_without_effect_certify_above_0_in_at_most_5_percent_of_runs(method):
    """The scores of one real training's 1,000 canaries, judged against inclusion bits drawn afresh for each
    seed: canaries whose inclusion had no effect on the scores, so any bound above 0 is a false alarm."""
    from dpaudit.auditing.checks.designs import AuditOptions, AuditTarget
    from dpaudit.auditing.jobs.one_run_design import train_and_score
    from dpaudit.auditing.statistics.one_run_fdp import one_run_audit

    mech = dpaudit.make("model", model="softmax", data="digits", steps=20, batch_size=256, noise_multiplier=1.0,
                        eta=1.0)
    job = dpaudit.OneRun(canaries=1000).job(AuditTarget(mech), AuditOptions(seed=11))
    scores, _, _ = train_and_score(job, 0)
    assert scores.shape == (1000,)
    # Each seed false-alarms with probability <= 0.05: over 100 seeds the count is Binomial(100, <= 0.05),
    # and P[count > 12] < 0.0015.
    alarms = sum(one_run_audit(scores, np.random.default_rng(500 + seed).integers(0, 2, scores.size), delta=1e-5,
                               method=method, seed=seed).epsilon_lower_bound > 0 for seed in range(100))
    assert alarms <= 12, alarms
