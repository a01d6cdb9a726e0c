"""jax_privacy's own figures for dp-mf, beside dpaudit's exact values (runs where the jax extra is installed:
CI step 1b, docs/versions.md)."""

from __future__ import annotations

import pytest

import dpaudit

pytest.importorskip("jax_privacy")

DELTA = 1e-5


@pytest.mark.parametrize("params", [
    {"strategy": "identity"}, {"strategy": "banded-sqrt", "bands": 4},
    {"strategy": "toeplitz", "coefficients": [1.0, -0.5]}], ids=["identity", "banded-sqrt", "non-monotone"])
@pytest.mark.parametrize("epochs", [1, 4])
def test_jax_privacy_s_claim_is_the_exact_value_where_its_sensitivity_is(params, epochs):
    mech = dpaudit.make("dp-mf", n=32, steps=32, epochs=epochs, noise_multiplier=4.0, **params)
    claims = {c.name: c for c in mech.claims() if str(c.relation) == "zero-out"}
    library, exact = claims["jax-privacy"], claims["mf-releases"]
    assert library.applicable and "agrees with dpaudit's exact" in library.citation
    # its PLD accountant is pessimistic by its discretisation: at or a little above the exact Gaussian value
    assert exact.epsilon(DELTA) <= library.epsilon(DELTA) <= exact.epsilon(DELTA) * (1 + 1e-4)
    assert library.delta(exact.epsilon(DELTA)) == pytest.approx(DELTA, rel=1e-3)


def test_the_tree_has_no_jax_privacy_claim():
    mech = dpaudit.make("dp-mf", n=16, steps=16, strategy="tree")
    claim = next(c for c in mech.claims() if c.name == "jax-privacy")
    assert not claim.applicable and "no tree aggregation" in claim.reason


def test_jax_privacy_s_optimised_strategies_by_name():
    from dpaudit.auditing.checks.zoo.dpmf import BANDMF_16

    bandmf = dpaudit.make("dp-mf", n=16, steps=16, epochs=4, strategy="bandmf", bands=4, noise_multiplier=2.0)
    assert bandmf.strategy_value.coefficients == pytest.approx(BANDMF_16, abs=1e-7)  # the zoo's golden values
    blt = dpaudit.make("dp-mf", n=8, steps=8, epochs=2, strategy="blt", noise_multiplier=2.0, output="iterates")
    claims = {c.name: c for c in blt.claims() if str(c.relation) == "zero-out"}
    assert claims["mf-releases"].epsilon(DELTA) <= claims["jax-privacy"].epsilon(DELTA) * (1 + 1e-4)
    assert blt.strategy_value.kind == "dense" and "buffered_toeplitz" in blt.strategy_value.label
