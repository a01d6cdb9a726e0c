"""The NumPy re-implementations of DP-Auditorium's test mechanisms behave as its classes do.

Draw for draw equality with the classes was checked against the upstream code (not a dependency);
these tests pin the behaviour that the audits rely on, with noise scales so small or so large that the
outcome is certain: the codes, the cutoff, the reveal-records query, the grid, and the exact laws' values
on the pairs docs/theory.md 3.8 quotes.
"""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.auditing.checks.zoo.auditorium import (
    ABOVE,
    BELOW,
    CASES,
    NO_RESPONSE,
    exact_epsilon,
    mean,
    noisy_max,
    one_step_gd,
    sparse_vector,
)

CASE = {case.name: case for case in CASES}


def _svt(records, variant, query="reveal-records", cutoff=1, epsilon=1e6, threshold=0.5):
    return sparse_vector(np.asarray(records, dtype=float)[:, None], np.random.default_rng(0), 4, variant=variant,
                         epsilon=epsilon, query=query, queries=5, threshold=threshold, cutoff=cutoff)


def test_svt_codes_cutoff_and_the_reveal_records_query():
    # noise of scale ~1e-6: the answers decide. [0, 1]: the last record (1) four times, then the one before (0)
    assert _svt([0.0, 1.0], 1)[0].tolist() == [ABOVE, NO_RESPONSE, NO_RESPONSE, NO_RESPONSE, NO_RESPONSE]
    assert _svt([0.0, 1.0], 1, cutoff=2)[0].tolist() == [ABOVE, ABOVE, NO_RESPONSE, NO_RESPONSE, NO_RESPONSE]
    assert _svt([1.0, 0.0], 6)[0].tolist() == [BELOW, BELOW, BELOW, BELOW, ABOVE]  # SVT6 stops after c answers too
    values = _svt([0.0, 1.0], 3)[0]  # SVT3 releases the noisy answer (about 1) on the grid
    assert abs(values[0] - 1.0) < 1e-3 and values[0] * 4096 == round(values[0] * 4096) and values[1] == NO_RESPONSE
    assert _svt([0.2, 0.3], 1, query="sum")[0].tolist() == [ABOVE] + [NO_RESPONSE] * 4  # the clipped sum, 0.5
    with pytest.raises(ValueError, match="at least two records"):
        _svt([1.0], 4)


def test_noisy_max_mean_and_gradient_step():
    votes = np.array([[1.0], [1.0], [3.0]])
    assert set(noisy_max(votes, np.random.default_rng(0), 50, epsilon=1e6, elements=5).ravel()) == {1.0}
    released = mean(np.array([[0.5], [2.0]]), np.random.default_rng(0), 8, epsilon=1e9, noised_mean=False,
                    noised_scale=False)
    assert np.allclose(released, 0.75)  # the clipped mean (0.5 + 1) / 2
    with pytest.warns(RuntimeWarning):  # DP-Auditorium's mean divides by the number of records: 0 / 0
        assert np.isnan(mean(np.zeros((0, 1)), np.random.default_rng(0), 2, epsilon=1.0, noised_mean=False,
                             noised_scale=False)).all()
    step = one_step_gd(np.array([[-1.0], [3.0]]), np.random.default_rng(0), 10_000, noise_multiplier=4.0, clip=1.0)
    assert abs(step.mean()) < 0.2 and abs(step.std() - 4.0) < 0.1  # clip(-1) + clip(3) = 0; noise sd 4 (5 sigma)


def test_exact_laws_on_the_pairs_the_search_must_find():
    # no background given: the best pair of a constant background; [0, 1] against [0, 1, 0]: every query moves
    assert exact_epsilon(CASE["svt4-reveal-records"], [0, 0, 0], [0, 0, 0, 1]) == pytest.approx(0.904, abs=2e-3)
    assert exact_epsilon(CASE["svt4-reveal-records"], [0, 1], [0, 1, 0]) == pytest.approx(1.614, abs=2e-3)
    assert exact_epsilon(CASE["svt6-reveal-records"], [1, 1, 1], [1, 1, 1, 0]) == pytest.approx(0.785, abs=2e-3)
    assert exact_epsilon(CASE["svt6-reveal-records"], [0, 1], [0, 1, 0]) == pytest.approx(1.278, abs=2e-3)
    assert exact_epsilon(CASE["svt1-reveal-records"], [0, 1], [0, 1, 0]) < 1.0  # the correct twin
    assert exact_epsilon(CASE["gd-one-step"], [-1], [1]) == pytest.approx(1.993, abs=1e-3)  # mu = 2 / 4
    assert exact_epsilon(CASE["gd-one-step"], [0], [1]) == pytest.approx(0.926, abs=1e-3)  # mu = 1 / 4
    assert CASE["gd-one-step"].claimed == pytest.approx(1.018, abs=1e-3)
    assert exact_epsilon(CASE["svt4-reveal-records"], [0], [0, 1]) is None  # the query refuses one record
