"""The report says which estimator is the headline, and why a listed one may certify more (issue: the README's
first audit certified its epsilon estimator's figure while its privacy profile implied more at the same delta)."""

from __future__ import annotations

import dataclasses

import dpaudit
from dpaudit.auditing.jobs.result import EstimateEntry
from dpaudit.reports.render import render
from dpaudit.reports.text import estimators_note, profile_epsilon


def _with_profile(result, epsilons, deltas):
    """``result`` whose profile record certifies ``deltas`` at ``epsilons`` (everything else unchanged)."""
    entries = tuple(dataclasses.replace(e, record={**e.record, "epsilons": epsilons, "delta_lower_bounds": deltas})
                    if e.name == "profile" else e for e in result.empirical.estimates)
    return dataclasses.replace(result, empirical=result.empirical.replace(estimates=entries))


def test_a_profile_that_implies_more_is_explained_and_one_that_does_not_is_not():
    result = dpaudit.audit(dpaudit.make("gaussian", sigma=1.0), trials=4_000)
    headline = result.epsilon_lower_bound
    above = _with_profile(result, [0.0, headline + 0.5, headline + 1.0], [0.5, 0.01, 0.0])
    assert profile_epsilon(above) == headline + 0.5
    note = estimators_note(above)
    assert "named before any trial was drawn" in note
    assert f"epsilon >= {headline + 0.5:.4g}" in note and "union bound" in note
    assert "union bound" in render(above, "md") and 'id="estimators-note"' in render(above, "html")
    below = _with_profile(result, [0.0, headline / 2, headline * 2], [0.5, 1e-4, 0.0])
    assert profile_epsilon(below) == headline / 2
    assert "union bound" not in estimators_note(below) and "named before any trial" in estimators_note(below)
    assert isinstance(result.empirical.estimates[0], EstimateEntry)
