"""A pair given by the caller is audited under the relation it realises, against the caller's claim; code
that draws randomness the seed does not fix says so instead of offering a seed to reproduce with.

The functions release a clipped sum plus ``Lap(1/2)``, rounded to ``2^-12``: one record more moves the sum
by 1, so the add/remove pair ``[0]`` against ``[0, 1]`` is exactly 2-DP (the ratio ``e^2`` holds on a whole
tail). At 2 x 10^4 trials it is certified 1.90-1.93 (seeds 0-2), nine tenths above a claim of 1, far beyond
the sampling error of a bound at that budget; against a claim of 2 (its exact value) a violation would be a
false certificate (probability at most 0.05 per seed).
"""

from __future__ import annotations

import numpy as np
import pytest

import dpaudit
from dpaudit.auditing.jobs.job import dataset_pair_relation
from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.dataset import Dataset
from dpaudit.reports.text import markdown

PAIR = (np.array([[0.0]]), np.array([[0.0], [1.0]]))  # add/remove: one record more


def _seeded(records, rng, trials):
    return np.rint((np.clip(records[:, 0], 0, 1).sum() + rng.laplace(0.0, 0.5, (trials, 1))) * 4096) / 4096


def _os_seeded(records, rng, trials):  # noise from a generator the operating system seeds, as a C++ library's
    noise = np.random.default_rng().laplace(0.0, 0.5, (trials, 1))
    return np.rint((np.clip(records[:, 0], 0, 1).sum() + noise) * 4096) / 4096


def test_a_pair_of_different_sizes_is_add_remove_and_the_callers_claim_judges_it():
    mech = dpaudit.from_batched_callable(_seeded, 1)
    result = dpaudit.audit(mech, dataset_pair=PAIR, claimed_epsilon=1.0, trials=20_000, seed=0)
    assert result.canary["relation"] == "add-remove"
    claimed = next(c for c in result.claims if c.name == "claimed_epsilon")
    assert claimed.relation == "add-remove" and claimed.epsilon == 1.0
    assert result.verdict == "violation" and result.violations == ("claimed_epsilon",)
    assert "add-remove" in markdown(result) and "replace-one" not in markdown(result)
    # the exact value as the claim: nothing violated, and the verdict reads the claim (not "no applicable claim")
    exact = dpaudit.audit(mech, dataset_pair=PAIR, claimed_epsilon=2.0, trials=20_000, seed=0)
    assert exact.verdict == "consistent" and "claimed_epsilon" in exact.verdict_reason
    with pytest.raises(dpaudit.PrivacyViolation, match=r"dataset-pair canary, add-remove\)"):
        dpaudit.assert_private(mech, epsilon=1.0, delta=1e-5, dataset_pair=PAIR, trials=20_000)


def test_pair_sizes_decide_the_relation():
    one, two, three = (Dataset(np.zeros((n, 1))) for n in (1, 2, 3))
    assert dataset_pair_relation(one, Dataset(np.ones((1, 1)))) == "replace-one"  # (one, one) is no pair
    assert dataset_pair_relation(two, one) == dataset_pair_relation(one, two) == "add-remove"
    with pytest.raises(ParameterError, match="got 1 and 3 records"):
        dataset_pair_relation(one, three)
    with pytest.raises(ParameterError, match="neighbouring"):
        dpaudit.audit(dpaudit.from_batched_callable(_seeded, 1), dataset_pair=(np.zeros((1, 1)), np.zeros((3, 1))))


def test_unseeded_code_gives_no_seed_to_reproduce_with():
    seeded = dpaudit.from_batched_callable(_seeded, 1)
    with pytest.raises(dpaudit.PrivacyViolation, match=r"Reproduce with assert_private\(.*seed=0"):
        dpaudit.assert_private(seeded, epsilon=1.0, delta=1e-5, dataset_pair=PAIR, trials=20_000)
    unseeded = dpaudit.from_batched_callable(_os_seeded, 1, seeded=False)
    assert not unseeded.seeded and seeded.seeded
    with pytest.raises(dpaudit.PrivacyViolation) as info:
        dpaudit.assert_private(unseeded, epsilon=1.0, delta=1e-5, dataset_pair=PAIR, trials=20_000)
    message = str(info.value)
    assert "Not reproducible from a seed" in message and "seed=" not in message and "Reproduce with" not in message
    result = dpaudit.audit(unseeded, dataset_pair=PAIR, trials=2_000)
    assert result.mechanism["seeded"] is False and result.mechanism["params"]["seeded"] is False
    reproduction = markdown(result).split("## Reproduction")[1]
    assert "not reproducible from it" in reproduction
    assert "not reproducible" not in markdown(dpaudit.audit(seeded, dataset_pair=PAIR, trials=2_000))
    with pytest.raises(ParameterError, match="seeded must be True or False, got seeded='no'"):
        dpaudit.from_callable(lambda records, rng: [0.0], 1, seeded="no")
