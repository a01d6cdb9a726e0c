"""Claims for shuffled batches: golden values of docs/theory.md 6 and the structure of the claims."""

from __future__ import annotations

import math

import pytest

import dpaudit
from dpaudit.mechanisms.accounting.claims import evaluate_claims
from dpaudit.mechanisms.accounting.shuffled_batches import (
    deterministic_delta,
    deterministic_epsilon,
    poisson_epsilon,
    shuffle_lower_delta,
    shuffle_lower_epsilon,
)

# (sigma, T, delta) -> Poisson / shuffle lower bound / upper bound, as printed to 3 decimals in docs/theory.md 6
# (Chua et al. 2024, Table 1 setting: one epoch, rate 1/T)
GOLDEN = [((1.0, 100, 1e-5), (0.718, 4.063, 4.377)),
          ((1.0, 1000, 1e-6), (0.187, 3.724, 4.887)),
          ((0.8, 1000, 1e-6), (0.468, 6.045, 6.312))]


@pytest.mark.parametrize("setting,expected", GOLDEN)
def test_reference_values(setting, expected):
    sigma, batches, delta = setting
    poisson = poisson_epsilon(delta, sigma=sigma, rate=1 / batches, steps=batches)
    lower = shuffle_lower_epsilon(delta, sigma=sigma, batches=batches)
    upper = deterministic_epsilon(delta, sigma=sigma)
    # 3-decimal figures: within half a unit of the last digit, plus the PLD's pessimistic discretisation
    assert poisson == pytest.approx(expected[0], abs=1.5e-3)
    assert lower == pytest.approx(expected[1], abs=6e-4)
    assert upper == pytest.approx(expected[2], abs=6e-4)
    assert poisson < lower < upper


def test_lower_bound_is_the_cube_set_sup_and_rounds_down():
    eps = shuffle_lower_epsilon(1e-5, sigma=1.0, batches=100)
    assert shuffle_lower_delta(eps, sigma=1.0, batches=100) > 1e-5  # still refuted at the returned value
    assert shuffle_lower_delta(eps + 1e-5, sigma=1.0, batches=100) <= 1e-5
    # the lower bound on delta never exceeds the upper bound's delta (Gaussian, one use)
    for e in (0.5, 2.0, 4.0):
        assert shuffle_lower_delta(e, sigma=1.0, batches=100) <= deterministic_delta(e, sigma=1.0)


def test_several_epochs():
    upper = deterministic_epsilon(1e-5, sigma=2.0, epochs=4)
    assert upper == pytest.approx(deterministic_epsilon(1e-5, sigma=1.0), rel=1e-9)  # mu = sqrt(E) / sigma
    once = shuffle_lower_epsilon(1e-5, sigma=2.0, batches=20, epochs=4, reshuffle=False)
    assert once == pytest.approx(shuffle_lower_epsilon(1e-5, sigma=1.0, batches=20), abs=1e-9)
    fresh = shuffle_lower_epsilon(1e-5, sigma=2.0, batches=20, epochs=4)
    one_epoch = shuffle_lower_epsilon(1e-5, sigma=2.0, batches=20)
    assert one_epoch < fresh <= upper  # composing epochs adds loss, never past the valid bound


def _entries(mechanism):
    return {e.name: e.to_dict() for e in evaluate_claims(mechanism.claims(), delta=1e-5)}


@pytest.mark.parametrize("name", ["dp-sgd", "dp-lssgd"])
def test_claims_of_shuffled_dpsgd(name):
    mech = dpaudit.make(name, n=1000, dim=1, batch_size=10, steps=100, noise_std=0.1, sampling="shuffle",
                        output="iterates")
    entries = _entries(mech)
    upper, lower, poisson = entries["gaussian-epochs"], entries["shuffle-lower-bound"], entries["poisson-as-reported"]
    assert upper["applicable"] and upper["relation"] == "zero-out" and upper["epsilon"] == pytest.approx(4.377, abs=6e-4)
    assert lower["kind"] == "lower-bound" and lower["epsilon"] == pytest.approx(4.063, abs=6e-4)
    assert not poisson["applicable"]
    assert poisson["reason"].startswith("assumes Poisson sampling; this mechanism shuffles")
    assert "epsilon=0.718" in poisson["reason"]
    assert not entries["bounded-domain-rdp"]["applicable"]
    assert "every iterate is released" in entries["bounded-domain-rdp"]["reason"]
    # no applicable upper bound below the lower bound of the same instance
    bounds = [e["epsilon"] for e in entries.values() if e["applicable"] and e["kind"] == "upper-bound"]
    assert bounds and min(bounds) >= lower["epsilon"]


def test_partial_epochs_and_shuffle_once():
    mech = dpaudit.make("dp-sgd", n=100, dim=1, batch_size=10, steps=25, noise_std=0.1, sampling="shuffle-once")
    entries = _entries(mech)
    # three epochs begun: the upper bound counts 3 uses, the lower bound the 2 complete epochs
    assert entries["gaussian-epochs"]["epsilon"] == pytest.approx(deterministic_epsilon(1e-5, sigma=1.0, epochs=3))
    assert entries["shuffle-lower-bound"]["epsilon"] == pytest.approx(
        shuffle_lower_epsilon(1e-5, sigma=1.0 / math.sqrt(2), batches=10))
    short = _entries(dpaudit.make("dp-sgd", n=100, dim=1, batch_size=10, steps=5, sampling="shuffle"))
    assert not short["shuffle-lower-bound"]["applicable"]


def test_model_claims_for_shuffled_batches():
    mech = dpaudit.make("model", n=512, batch_size=64, steps=16, sampling="shuffle")
    entries = _entries(mech)
    assert entries["gaussian-epochs"]["epsilon"] == pytest.approx(deterministic_epsilon(1e-5, sigma=1.0, epochs=2))
    assert not entries["poisson-as-reported"]["applicable"]
    assert not entries["pabi-per-index"]["applicable"]
