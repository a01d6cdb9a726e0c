"""The neighbour search judges a claim only under the relation it is made for.

OpenDP's sized bounded sum is a known-size claim (replace-one neighbours of
``n`` records): the search builds no pair of another size, so no add/remove
pair can be read as a violation of it (issue 72: such a pair was certified
at 7.80 against the meaningless map at ``d_in = 1``). A relation the claim is
not made for, named explicitly, is searched and certified, and the result
says the claim does not apply to it. OpenDP draws its own noise (unseeded),
so its audit runs at confidence ``1 - 1e-6``: a false violation at most once
in a million runs. The other audits are seeded.
"""

from __future__ import annotations

import numpy as np
import pytest

import dpaudit
from dpaudit.auditing.checks.search import candidate_pairs
from dpaudit.auditing.checks.search_relations import claim_relations, searched_relations
from dpaudit.core.errors import ParameterError

UNSEEDED_CONFIDENCE = 1 - 1e-6


def _sized_sum(size: int = 3):
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    from dpaudit.mechanisms.adapters import from_opendp

    space = dp.vector_domain(dp.atom_domain(bounds=(0.0, 10.0)), size=size), dp.symmetric_distance()
    measurement = space >> dp.t.then_sum() >> dp.m.then_laplace(scale=20.0)  # replace-one: epsilon 10 / 20
    return from_opendp(measurement, on="dataset", record_domain=(0.0, 10.0))


def test_a_known_size_claim_is_never_judged_on_an_add_remove_pair():
    mech = _sized_sum()
    # the claim is for replace-one pairs of 3 records; the map at d_in = 1 (about 1e-15) is no claim at all
    assert mech.dataset_size == 3 and mech.relations() == ["replace-one"]
    assert {c.relation for c in mech.claims()} == {"replace-one"}
    assert claim_relations(mech) == ("replace-one",)
    found = dpaudit.search(mech, trials=1_000, screen_trials=40, max_candidates=16, seed=0,
                           confidence=UNSEEDED_CONFIDENCE)
    assert found.candidates and {c["relation"] for c in found.candidates} == {"replace-one"}
    assert {(len(c["S"]), len(c["S_prime"])) for c in found.candidates} == {(3, 3)}
    assert found.chosen["relation"] == "replace-one" == found.result.canary["relation"]
    assert found.relations == ("replace-one",) == found.claim_relations and found.claim_applies
    assert not any(c.relation == "add-remove" for c in found.result.claims)
    assert found.result.verdict != "violation"
    with pytest.raises(ParameterError, match=r"relation='add-remove' needs datasets of two sizes.*3 records"):
        dpaudit.search(mech, relation="add-remove")
    with pytest.raises(ParameterError, match="must hold 3 records"):  # no audit feeds it another size either
        dpaudit.audit(mech, dataset_pair=([[0.0]], [[10.0]]), trials=1_000)
    with pytest.raises(ParameterError, match="size must be the mechanism's dataset size 3"):
        dpaudit.search(mech, size=4)


def _size(shown) -> int:
    """The number of records of a dataset as the table shows it (a list, or its size and runs past 64)."""
    return shown["records"] if isinstance(shown, dict) else len(shown)


def _noisy_count(records, rng, trials):
    """A count plus Laplace(1) on a 2^-12 grid: replacing a record changes nothing, adding one moves it by 1."""
    return np.round((len(records) + rng.laplace(0.0, 1.0, (trials, 1))) * 4096) / 4096


def test_a_replace_one_claim_is_searched_on_replace_one_pairs_only():
    # the count leaks only under add/remove (epsilon 1 there, 0 under replace-one): a claim of 0.5 for replace-one
    mech = dpaudit.from_batched_callable(_noisy_count, 1, record_domain=(0.0, 1.0))
    found = dpaudit.search(mech, epsilon=0.5, relation="replace-one", trials=4_000, screen_trials=100,
                           max_candidates=60, seed=0)
    assert {c["relation"] for c in found.candidates} == {"replace-one"}
    assert all(_size(c["S"]) == _size(c["S_prime"]) for c in found.candidates)
    assert found.claim_relations is None and found.claim_applies  # a function states no claim: the caller's is read
    assert not found.violation and found.epsilon_lower_bound <= 0.5


def test_a_relation_the_claim_is_not_made_for_is_certified_but_never_a_violation():
    mechanisms = pytest.importorskip("diffprivlib.mechanisms")
    from dpaudit.mechanisms.adapters import from_diffprivlib

    # a sum over [2, 3] with sensitivity 1: covered for replace-one, while adding a record moves it by 2 to 3
    mech = from_diffprivlib(mechanisms.Laplace(epsilon=1.0, sensitivity=1.0), record_domain=(2.0, 3.0))
    assert claim_relations(mech) == ("replace-one",)
    assert searched_relations(None, claim_relations(mech), None) == ("replace-one",)  # the default
    found = dpaudit.search(mech, epsilon=1.0, relation="add-remove", trials=4_000, screen_trials=100,
                           max_candidates=30, seed=0)
    assert found.chosen["relation"] == "add-remove" and found.epsilon_lower_bound > 1.0  # certified, yet:
    assert not found.claim_applies and not found.violation
    assert "says nothing about add-remove pairs" in found.note and found.to_dict()["claim_applies"] is False
    assert found.result.verdict == "inconclusive" and "no applicable claim" in found.result.verdict_reason


def test_zero_out_pairs_replace_a_record_by_the_zero_record():
    pairs = candidate_pairs(-1.0, 1.0, relations=["zero-out"], large_records=0)
    assert pairs and {p.relation for p in pairs} == {"zero-out"}
    for pair in pairs:  # one record differs, and it is 0 on one side
        changed = np.flatnonzero(pair.first.records[:, 0] != pair.second.records[:, 0])
        assert pair.first.n == pair.second.n and len(changed) == 1
        assert 0.0 in (pair.first.records[changed[0], 0], pair.second.records[changed[0], 0])
    mech = dpaudit.from_callable(lambda records, rng: [records.sum()], 1, record_domain=(1.0, 2.0))
    with pytest.raises(ParameterError, match="zero-out.*zero record"):
        dpaudit.search(mech, relation="zero-out")
    with pytest.raises(ParameterError, match="relation must be one of"):
        dpaudit.search(mech, relation="replace")


def test_a_known_size_keeps_every_dataset_at_that_size():
    pairs = candidate_pairs(0.0, 1.0, size=5, large_records=0)
    assert pairs and {(p.first.n, p.second.n) for p in pairs} == {(5, 5)}
    assert {p.relation for p in pairs} == {"replace-one"}
    for pair in pairs:
        assert np.count_nonzero(np.any(pair.first.records != pair.second.records, axis=1)) == 1
