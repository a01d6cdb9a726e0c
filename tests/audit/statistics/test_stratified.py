"""The stratified permutation test: valid under the null whatever the strata's shares, powerful within strata."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpaudit.auditing.statistics.stratified import StratifiedShift
from dpaudit.core.errors import ParameterError


def _test(scores_a, scores_b, strata_a, strata_b, chunks: int = 1):
    test = StratifiedShift()
    for side, scores, strata in (("a", scores_a, strata_a), ("b", scores_b, strata_b)):
        for part_scores, part_strata in zip(np.array_split(scores, chunks), np.array_split(strata, chunks)):
            test.add(side, part_scores, part_strata)
    return test.finish()


def _null(rng: np.random.Generator, n: int = 2_000):
    """Scores whose law depends on the stratum only; S' falls in the high strata more often (a value effect)."""
    strata_a = rng.integers(0, 40, n)
    strata_b = np.minimum(rng.integers(0, 40, n) + rng.integers(0, 10, n), 39)
    scores_a = strata_a / 10 + rng.uniform(size=n)  # bounded, as the low-bit scores are (a table of log ratios)
    scores_b = strata_b / 10 + rng.uniform(size=n)
    return scores_a, scores_b, strata_a[:, None], strata_b[:, None]


def test_the_null_is_rejected_no_more_often_than_its_level():
    rng = np.random.default_rng(0)
    runs, level = 300, 0.05
    rejected = sum(_test(*_null(rng)).p_value <= level for _ in range(runs))
    assert rejected <= runs * level + 3 * math.sqrt(runs * level * (1 - level))
    # the same scores read without their strata: the value effect alone is "significant" almost always
    unstratified = sum(_test(a, b, np.zeros((a.size, 1)), np.zeros((b.size, 1))).p_value <= level
                       for a, b, _, _ in (_null(rng) for _ in range(20)))
    assert unstratified >= 18


def test_a_shift_within_strata_is_found_and_chunks_add_up():
    rng = np.random.default_rng(1)
    scores_a, scores_b, strata_a, strata_b = _null(rng)
    shifted = scores_b + 0.3
    whole, chunked = _test(scores_a, shifted, strata_a, strata_b), _test(scores_a, shifted, strata_a, strata_b, 7)
    assert whole.p_value < 1e-6 and whole.strata == 40
    assert chunked.p_value == pytest.approx(whole.p_value, rel=1e-9)
    assert chunked.excess == pytest.approx(whole.excess, rel=1e-9)


def test_identical_scores_are_never_significant():
    # a constant score: the observed sum is its expectation up to rounding, which is taken off the safe way
    strata = np.arange(1_000)[:, None] % 17
    assert _test(np.full(1_000, 0.1), np.full(1_000, 0.1), strata, strata).p_value == 1.0


def test_bad_input_is_refused_naming_it():
    with pytest.raises(ParameterError, match="side must be 'a' or 'b', got side='c'"):
        StratifiedShift().add("c", np.zeros(3), np.zeros((3, 1)))
    with pytest.raises(ParameterError, match="scores must be finite"):
        StratifiedShift().add("a", np.array([np.nan]), np.zeros((1, 1)))
