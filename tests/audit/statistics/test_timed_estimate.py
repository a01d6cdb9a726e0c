"""The run time a refused audit states is said to be a constant-rate guess (issue 73: "estimated at 5 s" read as a
measurement for what ran for hours): a refusal draws no trial, so nothing is timed before it."""

from __future__ import annotations

import numpy as np
import pytest

import dpaudit
from dpaudit.core.errors import ParameterError

CALLS: list[int] = []


def counted_sum(records, rng):
    CALLS.append(1)
    return [float(np.sum(records)) + rng.normal()]


def test_the_refusal_says_its_time_is_a_guess_and_draws_no_trial():
    mech = dpaudit.from_callable(counted_sum, output_dim=1)
    pair = (np.zeros((3, 1)), np.ones((3, 1)))
    CALLS.clear()
    with pytest.raises(ParameterError, match="chunk_size") as refused:
        dpaudit.audit(mech, dataset_pair=pair, trials=10**9, chunk_size=100, delta=1e-5)
    assert "a guess, not timed" in str(refused.value) and "roughly" in str(refused.value)
    assert CALLS == []  # refused before any trial
