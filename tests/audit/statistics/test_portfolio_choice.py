"""The portfolio's choice: float-bits only where released values carry bits below a grid; a cross-fitted contest.

A one-step gradient descent released on a 2^-12 grid (``gd-one-step`` of ``audit/checks/zoo/auditorium.py``,
a Gaussian shift of mu = 1/2 on the pair ``[-1]`` against ``[1]``) used to lose its audit to float-bits, which
read nothing but a 16-window histogram of the values there (docs/theory.md 3.6).
"""

from __future__ import annotations

import numpy as np

import dpaudit
from dpaudit.attacks.canaries import CanaryPair
from dpaudit.attacks.float_bits import fit_float_bits, grid_reason
from dpaudit.auditing.checks.zoo.auditorium import CASES
from dpaudit.auditing.statistics.portfolio import choose_score
from dpaudit.core.kinds import Relation
from dpaudit.mechanisms.dataset import Dataset

GD = next(case for case in CASES if case.name == "gd-one-step")
PAIR = (np.array([[-1.0]]), np.array([[1.0]]))


def test_float_bits_declines_outputs_on_a_grid_and_still_runs_when_named():
    rng = np.random.default_rng(0)
    raw = rng.normal(size=(2_000, 2))
    gridded = np.rint(raw * 4096) / 4096
    assert grid_reason(raw, raw) is None and getattr(fit_float_bits(raw, raw), "declined", None) is None
    assert "grid of 2^-12" in grid_reason(gridded, gridded)
    assert "grid of 2^0" in grid_reason(np.array([[0.0], [1.0], [2.0]]), np.array([[1.0]]))  # codes and counts
    assert getattr(fit_float_bits(gridded, gridded), "declined", "").startswith("score 'float-bits'")
    mixed = gridded.copy()
    mixed[0, 0] = 0.1  # one value off the grid: its bits may carry something
    assert grid_reason(mixed, gridded) is None
    result = dpaudit.audit(GD.mechanism(), dataset_pair=PAIR, trials=20_000, seed=0)
    row = next(c for c in result.attack["portfolio"] if c["name"] == "float-bits")
    assert not row["applicable"] and "grid of 2^-12" in row["reason"] and result.attack["score"] != "float-bits"
    named = dpaudit.audit(GD.mechanism(), dataset_pair=PAIR, trials=20_000, seed=0, score="float-bits")
    assert named.attack["score"] == "float-bits"  # named alone it runs (a check that a snapping works)


class _Recorder:
    """A score that remembers the calibration rows it was fitted on (the projection, otherwise)."""

    name = "recorder"

    def __init__(self) -> None:
        self.fits: list[np.ndarray] = []

    def fit(self, pair, cal_a, cal_b, seed):
        self.fits.append(np.asarray(cal_a)[:, 1].copy())
        return lambda outputs: np.asarray(outputs, dtype=float)[:, 0]


def test_the_contest_is_cross_fitted():
    rng = np.random.default_rng(1)
    cal_a = np.column_stack([rng.normal(0.0, 1.0, 4_000), np.arange(4_000)])  # column 1: the row's number
    cal_b = np.column_stack([rng.normal(0.5, 1.0, 4_000), np.arange(4_000)])
    mech = dpaudit.from_callable(lambda records, rng: [0.0, 0.0], 2)
    pair = CanaryPair(mech, Dataset(np.zeros((1, 1))), Dataset(np.ones((1, 1))), np.array([1.0, 0.0]), None,
                      Relation.REPLACE_ONE, "dataset-pair")
    recorder = _Recorder()
    chosen, _, candidates = choose_score([recorder, dpaudit.attacks.scores.get_score("projection")], pair, cal_a,
                                         cal_b, seed=0, delta=1e-5, confidence=0.95, planned=36_000)
    first, second, final = recorder.fits  # fitted on each half (judged on the other), then on all of them
    assert first.max() < 2_000 <= second.min() and final.size == 4_000
    strengths = {c.name: c.epsilon for c in candidates}
    assert strengths["recorder"] == strengths["projection"] > 0  # the same test: the same mean of both ways


def test_the_gridded_gradient_step_is_read_by_its_shift_at_every_chunk_size():
    # without the grid check, float-bits wins seed 0's contest at chunks of 10^4 (measured)
    mech = GD.mechanism()
    for seed in range(2):
        chosen = {dpaudit.audit(mech, dataset_pair=PAIR, trials=20_000, seed=seed, chunk_size=chunk).attack["score"]
                  for chunk in (1_000, 10_000)}
        assert chosen <= {"projection", "gaussian", "logistic", "mlp"}, chosen  # read the shift, never the bits


def test_a_strength_whose_ways_plan_no_bound_reads_zero_without_an_overflow(monkeypatch):
    """A way round that plans no bound gives the most negative float; averaging two of them overflowed
    (numpy's 'overflow encountered in reduce', seen auditing an own torch model): it reads 0, silently."""
    import sys
    import warnings

    from dpaudit.auditing.statistics import portfolio

    held = np.random.default_rng(3).normal(size=(2, 200))
    monkeypatch.setattr(portfolio, "planned_value", lambda *args, **kwargs: -sys.float_info.max)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert portfolio._strength(*held, delta=1e-5, confidence=0.95, seed=0, planned=10_000) == 0.0
    values = iter([-sys.float_info.max, 0.8])  # one way with no bound: still nothing resolved
    monkeypatch.setattr(portfolio, "planned_value", lambda *args, **kwargs: next(values))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert portfolio._strength(*held, delta=1e-5, confidence=0.95, seed=0, planned=10_000) == 0.0


def test_candidates_whose_held_out_scores_are_in_one_order_share_their_strength(monkeypatch):
    # on one-dimensional outputs several candidates order the held-out scores alike; their strength is computed
    # once. Every candidate's strength and mu, and the choice, are the ones computed candidate by candidate
    import itertools

    from dpaudit.auditing.statistics import portfolio

    direct, shared_key, calls = portfolio._strength, portfolio._order_key, []
    unique = itertools.count()
    monkeypatch.setattr(portfolio, "_strength", lambda *a, **k: calls.append(1) or direct(*a, **k))
    for name, kwargs, index in (("gaussian", dict(sigma=2.0), None), ("laplace", dict(scale=2.0), None),
                                ("pnsgd", dict(n=4, dim=2, eta=0.5, sigma=1.0, domain="ball", radius=1.0), 4)):
        results = []
        for key in (shared_key, lambda a, b: next(unique).to_bytes(8, "little")):  # shared, then one per call
            monkeypatch.setattr(portfolio, "_order_key", key)
            calls.clear()
            result = dpaudit.audit(dpaudit.make(name, **kwargs), index=index, trials=4000, delta=1e-5, seed=3)
            results.append((result.attack["portfolio"], result.attack["score"], result.epsilon_lower_bound,
                            len(calls)))
        assert results[0][:3] == results[1][:3], name
        assert results[0][3] < results[1][3], name  # shared: fewer strengths computed


def test_a_preferred_score_is_taken_without_judging_the_others(monkeypatch):
    # randomised response's outcome: the discrete score's table reads the whole output, so it is taken without a
    # contest; only its own strength is computed (both ways round), the other applicable candidates are listed as
    # not judged, and the report lists them once each under that note
    from dpaudit.auditing.jobs import runner
    from dpaudit.auditing.statistics import portfolio
    from dpaudit.reports.tables import portfolio_rows
    from dpaudit.reports.text import markdown
    from tests import discrete_algorithms as algorithms

    direct, calls, choices = portfolio._strength, [], []
    monkeypatch.setattr(portfolio, "_strength", lambda *a, **k: calls.append(1) or direct(*a, **k))
    choose = runner.choose_score
    monkeypatch.setattr(runner, "choose_score", lambda *a, **k: choices.append(1) or choose(*a, **k))
    algorithm = algorithms.randomized_response(1.0)
    result = dpaudit.audit(algorithm.mechanism, dataset_pair=algorithm.pair, trials=20_000, delta=0.0, seed=0)
    rows = {c["name"]: c for c in result.attack["portfolio"]}
    assert result.attack["score"] == "discrete" and rows["discrete"]["chosen"]
    assert choices and len(calls) == 2 * len(choices)  # the chosen score's two ways round, at each choice
    assert rows["discrete"]["epsilon"] is not None
    others = [c for c in rows.values() if c["applicable"] and not c["chosen"]]
    assert {c["name"] for c in others} >= {"projection", "gaussian", "logistic", "mlp"}
    assert all(c["epsilon"] is None and c["reason"].startswith("not judged: 'discrete'") for c in others)
    table = portfolio_rows(result)
    assert sorted(row[1] for row in table if row[3] == "not judged") == sorted(c["name"] for c in others)
    assert "listed as not judged" in markdown(result)
