"""Open seams: a score and an estimator defined here, in the test file, audit a built-in mechanism.

Neither is registered anywhere and no module of the package is edited: the score is passed to
``dpaudit.audit(score=obj)``, the estimator to ``dpaudit.audit(estimators=[obj])``.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import dpaudit
from dpaudit.attacks.scores import SCORES, register_score, registered_scores
from dpaudit.auditing.statistics.confidence import cp_upper
from dpaudit.auditing.jobs.result import load_result
from dpaudit.core.errors import ParameterError
from dpaudit.reports.render import render

TRIALS = 20_000


class MeanGapScore:
    """Projection on the difference of the calibration means (fitted on calibration outputs only)."""

    name = "mean-gap"
    needs_calibration = True

    def __init__(self) -> None:
        self.calls = []

    def fit(self, pair, calibration_a, calibration_b, seed):
        self.calls.append((len(calibration_a), len(calibration_b)))
        gap = np.asarray(calibration_b).mean(axis=0) - np.asarray(calibration_a).mean(axis=0)
        return lambda outputs: np.asarray(outputs, dtype=float) @ gap


def test_a_score_object_defined_here_audits_a_builtin_mechanism():
    score = MeanGapScore()
    mech = dpaudit.make("gaussian", sigma=1.0)
    result = dpaudit.audit(mech, score=score, trials=TRIALS, seed=3)
    assert result.attack["score"] == "mean-gap" and result.to_dict()["attack"]["score"] == "mean-gap"
    assert "mean-gap" not in SCORES and "mean-gap" not in registered_scores()
    # fitted once, on the calibration trials only (10% of each side)
    assert score.calls == [(TRIALS // 10, TRIALS // 10)]
    # mu = 2 (replace-one, sigma 1): the mean gap is the optimal direction, so the bound is far above 0
    # and below the claim (a sound bound on a correct mechanism; it fails with probability <= 5%)
    assert 1.0 < result.epsilon_lower_bound < result.claims[0].epsilon or result.verdict == "consistent"
    assert result.verdict == "consistent"


def test_a_changed_score_class_is_a_different_audit():
    class Other(MeanGapScore):
        def fit(self, pair, calibration_a, calibration_b, seed):
            return lambda outputs: -super(Other, self).fit(pair, calibration_a, calibration_b, seed)(outputs)

    mech = dpaudit.make("gaussian", sigma=1.0)
    first = dpaudit.auditing.jobs.api.make_job(mech, score=MeanGapScore(), trials=TRIALS)
    second = dpaudit.auditing.jobs.api.make_job(mech, score=Other(), trials=TRIALS)
    named = dpaudit.auditing.jobs.api.make_job(mech, score="projection", trials=TRIALS)
    assert len({first.audit_id, second.audit_id, named.audit_id}) == 3


def test_bad_score_objects_are_refused_by_name():
    mech = dpaudit.make("gaussian", sigma=1.0)
    with pytest.raises(ParameterError, match="score must be a name, an object with name and fit"):
        dpaudit.audit(mech, score=object(), trials=TRIALS)
    with pytest.raises(ParameterError, match="score names must be distinct"):
        dpaudit.audit(mech, score=["projection", "projection"], trials=TRIALS)
    with pytest.raises(ParameterError, match="did you mean 'gaussian'"):
        dpaudit.audit(mech, score="gausian", trials=TRIALS)


class CountingScore:
    """A user score that keeps a counter named ``fitted`` (state, not a capability flag) and no flag."""

    name = "counting"

    def __init__(self) -> None:
        self.fitted = 0
        self.calls = []

    def fit(self, pair, calibration_a, calibration_b, seed):
        self.fitted += 1
        self.calls.append((len(calibration_a), len(calibration_b)))
        gap = np.asarray(calibration_b).mean(axis=0) - np.asarray(calibration_a).mean(axis=0)
        return lambda outputs: np.asarray(outputs, dtype=float) @ gap


def test_a_counter_named_fitted_does_not_stop_calibration():
    # while the flag was read as getattr(score, "fitted", True), fitted = 0 meant "ignores calibration":
    # fit received None (and this fit failed on len(None))
    score = CountingScore()
    result = dpaudit.audit(dpaudit.make("gaussian", sigma=1.0), score=score, trials=TRIALS, seed=3)
    assert score.fitted == 1 and score.calls == [(TRIALS // 10, TRIALS // 10)]
    assert result.attack["score"] == "counting"


@pytest.mark.parametrize("member, value", [("needs_calibration", 0), ("needs_calibration", "yes"),
                                           ("needs_calibration", None), ("applies", True), ("fit", 3)])
def test_a_wrongly_typed_member_is_refused_by_name(member, value):
    score = MeanGapScore()
    setattr(score, member, value)
    mech = dpaudit.make("gaussian", sigma=1.0)
    message = rf"score 'mean-gap': {member} must be .*got {member}={re.escape(repr(value))}"
    with pytest.raises(ParameterError, match=message):
        dpaudit.audit(mech, score=score, trials=TRIALS)
    with pytest.raises(ParameterError, match=message):  # the way into configs: a registered name
        register_score(score)
    assert "mean-gap" not in registered_scores() and score.calls == []


def test_a_score_that_needs_no_calibration_is_fitted_on_none():
    class Fixed(MeanGapScore):
        name = "fixed"
        needs_calibration = False

        def fit(self, pair, calibration_a, calibration_b, seed):
            self.calls.append((calibration_a, calibration_b))
            return lambda outputs: np.asarray(outputs, dtype=float) @ np.asarray(pair.direction, dtype=float)

    score = Fixed()
    dpaudit.audit(dpaudit.make("gaussian", sigma=1.0), score=score, trials=2_000, seed=0)
    assert score.calls and set(score.calls) == {(None, None)}  # never shown calibration outputs


def test_the_former_flag_name_warns_and_is_not_read():
    score = CountingScore()
    score.fitted = False  # the flag's former name, as a bool: calibration outputs are passed all the same
    with pytest.warns(DeprecationWarning, match="fitted=False, which is no longer read: the flag is needs_calibration"):
        dpaudit.audit(dpaudit.make("gaussian", sigma=1.0), score=score, trials=2_000, seed=0)
    assert score.calls == [(200, 200)]


@dataclasses.dataclass(frozen=True)
class _TVPlan:
    threshold: float

    def count(self, side, scores):
        scores = np.asarray(scores)
        return np.array([np.sum(scores >= self.threshold) if side == "a" else np.sum(scores < self.threshold)])


@dataclasses.dataclass(frozen=True)
class TVBound:
    value: float
    confidence: float
    threshold: float
    quantity: str = "total variation >="
    method: str = "clopper-pearson at the calibration median"

    def to_dict(self):
        return dataclasses.asdict(self)


class TotalVariation:
    """A certified lower bound on the total variation distance: 1 - FPR_hi - FNR_hi at one threshold."""

    name = "total-variation"

    def plan(self, cal_a, cal_b, settings):
        return _TVPlan(float(np.median(np.concatenate([cal_a, cal_b]))))

    def finish(self, plan, counts, settings):
        beta = 1 - settings.confidence
        fpr = cp_upper(counts.false_positives, counts.trials_a, beta / 2)[0]
        fnr = cp_upper(counts.false_negatives, counts.trials_b, beta / 2)[0]
        return TVBound(max(1 - fpr - fnr, 0.0), settings.confidence, plan.threshold)


def test_an_estimator_defined_here_shows_in_the_result_and_the_markdown_report():
    mech = dpaudit.make("gaussian", sigma=1.0)
    result = dpaudit.audit(mech, estimators=[TotalVariation()], trials=TRIALS, seed=1)
    names = [e.name for e in result.empirical.estimates]
    assert names == ["epsilon", "gdp", "profile", "total-variation"]
    tv = result.empirical.estimates[-1]
    # mu = 2: TV = 2 Phi(1) - 1 = 0.683; 18,000 certification trials per side put the Clopper-Pearson
    # upper bounds about 0.006 above each error rate (0.159), so the bound is near 0.67 and below 0.683
    assert 0.64 < tv.value < 0.683 and tv.quantity == "total variation >=" and tv.confidence == 0.95
    # scores are N(-1, 1) on S and N(1, 1) on S': the pooled calibration median is near 0
    assert tv.record["threshold"] == pytest.approx(0.0, abs=0.1)
    report = render(result, "md")
    assert "## Estimators" in report and "total-variation" in report and f"{tv.value:.4g}" in report
    assert "total-variation" in render(result, "html")
    # the statement survives the JSON document and back
    again = load_result(result.to_dict())
    assert again.empirical.estimates[-1] == tv
    assert "total-variation" in render(result.to_dict(), "md")


def test_estimator_names_must_be_new():
    class Clash(TotalVariation):
        name = "epsilon"

    with pytest.raises(ParameterError, match="estimator names must be distinct"):
        dpaudit.audit(dpaudit.make("gaussian", sigma=1.0), estimators=[Clash()], trials=TRIALS)


@pytest.mark.parametrize("member", ["plan", "finish"])
def test_an_estimator_member_of_the_wrong_type_is_refused_by_name(member):
    estimator = TotalVariation()
    setattr(estimator, member, "median")
    with pytest.raises(ParameterError, match=f"estimator 'total-variation': {member} must be a method, "
                                             f"got {member}='median'"):
        dpaudit.audit(dpaudit.make("gaussian", sigma=1.0), estimators=[estimator], trials=TRIALS)


def test_the_default_portfolio_lists_every_candidate_and_the_one_that_certified():
    result = dpaudit.audit(dpaudit.make("laplace", scale=1.0), trials=TRIALS, seed=2)
    attack = result.attack
    assert attack["requested"] == "auto" and attack["candidates"] == list(registered_scores())
    rows = {row["name"]: row for row in attack["portfolio"]}
    assert [name for name, row in rows.items() if row["chosen"]] == [attack["score"]]
    # the built-in Laplace snaps its releases: float-bits does not apply, and says why; no model is trained
    assert not rows["float-bits"]["applicable"] and "snaps its outputs" in rows["float-bits"]["reason"]
    assert not rows["canary-loss"]["applicable"]
    applicable = [row for row in rows.values() if row["applicable"]]
    assert {"projection", "gaussian", "logistic", "mlp", "exact"} <= {row["name"] for row in applicable}
    assert rows[attack["score"]]["epsilon"] == max(row["epsilon"] for row in applicable)
    report = render(result, "md")
    assert "## Scores tried (portfolio)" in report and "certified" in report
    assert "portfolio" in render(result, "html")


def test_dpaudit_check_looks_and_run_does_not(write_config, tmp_path, capsys):
    import json

    from dpaudit.cli import main

    config = write_config('[mechanism]\nname = "gaussian"\nsigma = 1.0\n[attack]\nscore = "projection"\n'
                          '[audit]\ntrials = 4000\nchunk_size = 500\n')
    assert main(["check", str(config), "--store", str(tmp_path / "s.sqlite"), "--quiet", "--json"]) == 0
    checked = json.loads(capsys.readouterr().out)
    # 3,600 certification trials in 8 chunks: looks after 1, 2, 4 and 8 chunks, the last at 1 - 0.05 / 2
    assert checked["sequential"]["looks"] == [1, 2, 4, 8] and checked["sequential"]["stopped_at_look"] == 4
    assert checked["empirical"]["per_index_confidence"] == pytest.approx(1 - 0.05 / 2)  # the final look: beta / 2
    assert main(["run", str(config), "--store", str(tmp_path / "r.sqlite"), "--quiet", "--json"]) == 0
    ran = json.loads(capsys.readouterr().out)
    assert "sequential" not in ran and ran["empirical"]["confidence"] == 0.95


def test_the_former_helper_names_warn_and_answer_from_the_new_flag():
    from dpaudit.attacks.scores import get_score, is_fitted, score_fitted

    with pytest.warns(DeprecationWarning, match="score_needs_calibration"):
        assert is_fitted("gaussian") is True
    with pytest.warns(DeprecationWarning, match="score_needs_calibration"):
        assert score_fitted(get_score("projection")) is False
