"""Scheduled gradient canaries: the pair, the sampler, and outputs unchanged without a schedule."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from dpaudit import mechanisms
from dpaudit.attacks.canaries import CanarySpec
from dpaudit.mechanisms import ParameterError
from dpaudit.core.kinds import Relation


def _digest(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array, dtype=np.float64).tobytes()).hexdigest()[:16]


# Digests of the samplers' outputs before scheduled canaries existed (same seeds, same pairs): a canary
# without a schedule must leave every output bit-identical.
@pytest.mark.parametrize("name, params, digest", [
    ("dp-sgd", {"n": 20, "batch_size": 5, "steps": 30}, "1dc8e523a64053df"),
    ("dp-sgd", {"n": 20, "batch_size": 5, "steps": 30, "loss": "logistic", "dim": 2, "sampling": "poisson"},
     "646c4ca6e1f2ffc4"),
    ("dp-sgd", {"n": 20, "batch_size": 5, "steps": 30, "sampling": "shuffle"}, "0503980d79926835"),
    ("dp-lssgd", {"n": 20, "batch_size": 5, "steps": 30, "dim": 4}, "71f584a11ec973a4"),
])
def test_outputs_without_a_schedule_are_unchanged(name, params, digest):
    mech = mechanisms.make(name, **params)
    spec = CanarySpec()
    pair = spec.build(mech, spec.indices(mech)[-1])
    out = np.concatenate([mech.sample(pair.dataset_a, trials=300, seed=7),
                          mech.sample(pair.dataset_b, trials=300, seed=8)])
    assert _digest(out) == digest


def test_every_k_schedules_steps_k_2k_and_pairs_zero_out():
    mech = mechanisms.make("dp-sgd", n=100, batch_size=100, steps=250, noise_std=0.1581)
    spec = CanarySpec(every=5)
    assert spec.indices(mech) == [None]
    pair = spec.build(mech, None)
    assert sorted(pair.dataset_a.scheduled) == list(range(5, 251, 5))
    assert pair.dataset_b.scheduled == {} and pair.relation == Relation.ZERO_OUT
    opposite = CanarySpec(steps=[3, 1], pair="opposite").build(mech, None)
    assert sorted(opposite.dataset_b.scheduled) == [1, 3] and opposite.relation == Relation.REPLACE_ONE
    assert np.allclose(opposite.dataset_b.scheduled[1], -opposite.dataset_a.scheduled[1])


def test_the_scheduled_gradient_moves_the_last_iterate_by_its_steps():
    # Along u the last iterate is start - eta (|A| L / m + N(0, T s^2)): mean -eta |A| L / m. With 20000
    # trials the mean's standard error is eta s sqrt(T) / sqrt(20000); 5 standard errors bound the test.
    mech = mechanisms.make("dp-sgd", n=10, batch_size=5, steps=40, noise_std=0.2, eta=0.5)
    pair = CanarySpec(every=4).build(mech, None)
    out = mech.sample(pair.dataset_a, trials=20_000, seed=3)[:, 0]
    expected = -0.5 * 10 * 1.0 / 5
    error = 0.5 * 0.2 * np.sqrt(40) / np.sqrt(20_000)
    assert abs(out.mean() - expected) < 5 * error + 2.0**-12
    assert abs(out.std() - 0.5 * 0.2 * np.sqrt(40)) < 0.05 * 0.5 * 0.2 * np.sqrt(40)


def test_a_direction_per_step_is_used_at_its_step():
    mech = mechanisms.make("dp-sgd", n=4, batch_size=2, steps=6, dim=2, noise_std=1e-3, eta=1.0)
    pair = CanarySpec(steps=[2, 5], directions=[[1, 0], [0, 3]]).build(mech, None)
    assert np.allclose(pair.dataset_a.scheduled[2], [1, 0]) and np.allclose(pair.dataset_a.scheduled[5], [0, 1])
    out = mech.sample(pair.dataset_a, trials=50, seed=1)
    # each inserted gradient (norm 1) moves theta by -eta / m = -0.5 along its own axis; noise 1e-3 per step
    assert np.allclose(out.mean(axis=0), [-0.5, -0.5], atol=0.01)
    assert np.allclose(pair.direction, np.array([1.0, 1.0]) / np.sqrt(2))


@pytest.mark.parametrize("fields, message", [
    ({"every": 0}, "canary every must be an integer >= 1, got every=0"),
    ({"every": 2.5}, "canary every must be an integer >= 1"),
    ({"steps": []}, "canary steps must be a non-empty list"),
    ({"steps": [0]}, "canary steps must be integers >= 1"),
    ({"steps": [2, 2]}, "canary steps must list each step once"),
    ({"every": 2, "steps": [1]}, "give one"),
    ({"directions": [[1.0]]}, "they need every or steps"),
    ({"every": 2, "directions": [[0.0]]}, "direction 1 must be a non-zero list of numbers"),
])
def test_bad_schedules_are_refused_by_name(fields, message):
    with pytest.raises(ParameterError, match=message):
        CanarySpec(**fields)


@pytest.mark.parametrize("name, params, fields, message", [
    ("dp-sgd", {"steps": 10}, {"steps": [11]}, "step 11 is beyond the run, whose steps are 1..10"),
    ("dp-sgd", {"steps": 10}, {"every": 11}, "every=11 schedules no step in a run of 10 steps"),
    ("dp-sgd", {"steps": 4}, {"every": 2, "directions": [[1.0], [1.0, 0.0]]}, "direction 2 must have 1 number"),
    ("dp-sgd", {"steps": 4}, {"every": 2, "directions": [[1.0]]}, "one direction per scheduled step \\(2\\)"),
    ("dp-sgd", {"steps": 4}, {"every": 2, "kind": "input"}, "canary kind must be 'gradient'"),
    ("dp-sgd", {"steps": 4}, {"every": 2, "index": 3}, "canary index does not apply to a scheduled canary"),
    ("pnsgd", {"n": 5}, {"every": 2}, "pnsgd has no such steps"),
])
def test_schedules_are_checked_against_the_run(name, params, fields, message):
    mech = mechanisms.make(name, **params)
    spec = CanarySpec(**fields)
    with pytest.raises(ParameterError, match=message):
        spec.build(mech, spec.indices(mech)[0])


def test_a_dataset_with_a_step_beyond_the_run_is_refused():
    from dpaudit.mechanisms.dataset import Dataset

    mech = mechanisms.make("dp-sgd", n=4, batch_size=2, steps=3)
    data = Dataset(np.zeros((4, 1)), scheduled={4: [1.0]})
    with pytest.raises(ParameterError, match="canary step 4 is beyond the run"):
        mech.sample(data, trials=2, seed=0)
    with pytest.raises(ParameterError, match="pnsgd has none"):
        mechanisms.make("pnsgd", n=4).sample(Dataset(np.zeros((4, 1)), scheduled={1: [1.0]}), trials=2, seed=0)


def test_a_schedule_from_python_is_recorded_in_the_result():
    import dpaudit

    mech = mechanisms.make("dp-sgd", n=4, batch_size=4, steps=20, noise_std=0.25)
    result = dpaudit.audit(mech, canary={"steps": [20, 1], "directions": [[1.0], [2.0]]}, trials=500, seed=0,
                           workers=1)
    assert result.canary["steps"] == [1, 20] and result.canary["directions"] == [[1.0], [2.0]]
    assert "every" not in result.canary and result.canary["relation"] == "zero-out"
    names = {claim.name for claim in result.claims if claim.applicable}
    assert {"scheduled-composition", "scheduled-amplification", "exact-instance"} <= names
