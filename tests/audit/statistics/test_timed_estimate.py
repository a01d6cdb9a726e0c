"""The run time an over-budget audit is refused with comes from a timed first chunk, not from a constant rate
(issue 73: ``--trials 1e9`` was "estimated at 5 s" and ran at an ETA of about 2 hours)."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest

import dpaudit
from dpaudit.core.errors import ParameterError

PAUSE = 0.001  #: seconds each trial of the slow function takes, at least


def slow_sum(records, rng):
    time.sleep(PAUSE)
    return [float(np.sum(records)) + rng.normal()]


def test_the_refusal_states_the_time_of_a_timed_chunk():
    mech = dpaudit.from_callable(slow_sum, output_dim=1)
    pair = (np.zeros((3, 1)), np.ones((3, 1)))
    with pytest.raises(ParameterError, match="chunk_size") as refused:
        dpaudit.audit(mech, dataset_pair=pair, trials=10**9, chunk_size=100, delta=1e-5)
    message = str(refused.value)
    assert "timed on a chunk of 100 trials" in message
    # 10^9 trials per side at >= 1 ms each: at least 2 x 10^6 s (23 days); a constant rate guessed seconds
    amount, unit = re.search(r"about ([\d.]+) (years|days|hours|minutes|s) on 1 worker", message).groups()
    seconds = float(amount) * {"years": 365 * 86400, "days": 86400, "hours": 3600, "minutes": 60, "s": 1}[unit]
    assert seconds >= 2 * 10**9 * PAUSE * 0.95  # 0.95: the one decimal the message keeps
