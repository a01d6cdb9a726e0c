"""The contract every claim builder keeps (each built-in builder inherits the checks below), and the registry's.

A builder says which descriptions it supports and turns each into claims:
every claim names itself, cites its source, assumes a known relation, and
either evaluates to a non-negative epsilon or says why it does not apply;
equal descriptions give the same claims, built once.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import dpaudit
from dpaudit.core.kinds import Relation
from dpaudit.mechanisms.accounting.builders import BUILDERS, _built, builder_for, claims_for, evaluated_claims
from dpaudit.mechanisms.accounting.claims import Claim, evaluate_claims
from dpaudit.mechanisms.accounting.entry import NEEDS_POSITIVE_DELTA, REFERENCE_KINDS
from dpaudit.mechanisms.accounting.descriptions import (
    FixedGuarantee,
    GaussianGuarantee,
    InapplicableGuarantee,
    LibraryGuarantees,
    PrivacyDescription,
    ZcdpGuarantee,
)

#: Descriptions of every built-in family and of a library's statements, in several settings each.
SAMPLES = {
    "gaussian": lambda: dpaudit.make("gaussian", sigma=2.0),
    "laplace": lambda: dpaudit.make("laplace", scale=2.0, dim=3),
    "shuffled-rr": lambda: dpaudit.make("shuffled-rr", n=20, epsilon0=2.0),
    "kernel": lambda: dpaudit.make("projected-kernel", n=5, dim=1, sigma=1.0, domain="box"),
    "kernel-laplace": lambda: dpaudit.make("projected-kernel", n=5, dim=1, noise="laplace", sigma=None, scale=1.0,
                                           domain="box"),
    "pnsgd": lambda: dpaudit.make("pnsgd", n=10, dim=2, sigma=1.0),
    "pnsgd-stop": lambda: dpaudit.make("pnsgd", n=10, dim=1, sigma=2.0, variant="stop", domain="box"),
    "pnsgd-concave": lambda: dpaudit.make("pnsgd", n=10, dim=1, sigma=1.0, loss="concave", domain="whole"),
    "multi-epoch": lambda: dpaudit.make("multi-epoch-pnsgd", n=10, epochs=3, sigma=2.0),
    "dp-sgd-poisson": lambda: dpaudit.make("dp-sgd", n=100, batch_size=10, steps=20, sampling="poisson"),
    "dp-sgd-shuffle": lambda: dpaudit.make("dp-sgd", n=20, batch_size=5, steps=8, sampling="shuffle"),
    "dp-lssgd": lambda: dpaudit.make("dp-lssgd", n=100, dim=4, batch_size=10, steps=20),
    "dp-mf-tree": lambda: dpaudit.make("dp-mf", n=16, steps=16, epochs=2, strategy="tree", noise_multiplier=2.0),
    "dp-mf-toeplitz": lambda: dpaudit.make("dp-mf", n=8, steps=8, epochs=2, strategy="toeplitz",
                                           coefficients=[1.0, -0.5], selection="shuffled", output="iterates"),
    "model-pnsgd": lambda: dpaudit.make("model", model="logistic", data="breast_cancer", algorithm="pnsgd",
                                        radius=1.0, clip=1.0, epochs=1),
}


def _descriptions() -> dict[str, PrivacyDescription]:
    described = {name: make().privacy_description for name, make in SAMPLES.items()
                 if name != "model-pnsgd" or _has_sklearn()}
    described["library"] = LibraryGuarantees((
        FixedGuarantee("fixed", "a library's (epsilon, delta)", "replace-one", 1.0, 1e-6),
        ZcdpGuarantee("zcdp", "a library's rho", "add-remove", 0.5),
        GaussianGuarantee("gaussian", "a library's Gaussian", "replace-one", 1.0),
        InapplicableGuarantee("inapplicable", "a library's claim", "replace-one", "not this query")))
    described["library-not-covered"] = dataclasses.replace(described["library"], not_covered="records out of range")
    described["callable"] = dpaudit.from_callable(lambda records, rng: [0.0], output_dim=1).privacy_description
    return described


def _has_sklearn() -> bool:
    try:
        import sklearn  # noqa: F401
    except ImportError:
        return False
    return True


DESCRIPTIONS = _descriptions()


@pytest.mark.parametrize("name", sorted(DESCRIPTIONS))
def test_one_builder_supports_each_description(name):
    description = DESCRIPTIONS[name]
    assert sum(builder.supports(description) for builder in BUILDERS) == 1
    hash(description)  # frozen and hashable: claims are kept per description
    field = dataclasses.fields(description)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(description, field, None)


def test_every_builder_is_exercised_and_named_once():
    used = {builder_for(description).name for description in DESCRIPTIONS.values()}
    assert used == {builder.name for builder in BUILDERS}
    assert len({builder.name for builder in BUILDERS}) == len(BUILDERS)


@pytest.mark.parametrize("name", sorted(DESCRIPTIONS))
def test_every_claim_keeps_the_contract(name):
    description = DESCRIPTIONS[name]
    builder = builder_for(description)
    claims = claims_for(description, 1 if builder.per_index else None)
    relations = {str(relation) for relation in Relation}
    for claim in claims:
        assert isinstance(claim, Claim) and claim.name and claim.citation
        assert str(claim.relation) in relations
        entry = claim.evaluate(delta=1e-5)  # conditions that depend on the point applied
        # a reference (REFERENCE_KINDS) is never applicable: code keeping the applicable claims gets bounds only
        assert not (claim.kind in REFERENCE_KINDS and (claim.applicable or entry.applicable)), claim.name
        if not entry.applicable:
            assert entry.reason, claim.name
            assert claim.applicable or claim.shows_value or math.isnan(claim.epsilon(1e-5))
            if claim.shows_value:
                assert entry.reason.startswith(REFERENCE_KINDS[claim.kind]), entry.reason
            continue
        epsilon = claim.epsilon(1e-5)
        assert epsilon >= 0 or math.isinf(epsilon), (claim.name, epsilon)
        delta = claim.delta(epsilon if math.isfinite(epsilon) else 1.0)
        assert 0.0 <= delta <= 1.0
    if name == "library-not-covered":
        assert claims and not any(claim.applicable for claim in claims)


@pytest.mark.parametrize("name", sorted(DESCRIPTIONS))
def test_every_claim_answers_at_delta_zero(name):
    """delta = 0 is a valid audit setting: every claim evaluates there without an error, either to a finite
    epsilon (a pure-DP bound: Laplace, randomized response, a stated (epsilon, 0)) or as not applicable with
    the reason (NEEDS_POSITIVE_DELTA for a bound stated for delta > 0 only)."""
    description = DESCRIPTIONS[name]
    builder = builder_for(description)
    claims = claims_for(description, 1 if builder.per_index else None)
    for claim, entry in zip(claims, evaluate_claims(claims, delta=0.0)):
        if entry.applicable:
            assert claim.covers_delta_zero and entry.epsilon is not None and math.isfinite(entry.epsilon), entry
            assert claim.delta(entry.epsilon) <= 1e-12, entry  # the profile reaches 0 at that epsilon
        else:
            assert entry.reason and entry.epsilon is None, entry
            assert claim.covers_delta_zero or not claim.valued or entry.reason == NEEDS_POSITIVE_DELTA, entry
    evaluated = evaluated_claims(description, 1 if builder.per_index else None, delta=0.0, profile_epsilons=(0.5, 1.0))
    assert len(evaluated) == len(claims)


@pytest.mark.parametrize("name", sorted(DESCRIPTIONS))
def test_equal_descriptions_share_one_build(name):
    description = DESCRIPTIONS[name]
    index = 1 if builder_for(description).per_index else None
    first, again = claims_for(description, index), claims_for(description, index)
    assert first == again and all(a is b for a, b in zip(first, again))  # the same objects: built once
    assert first is not again  # a fresh list each call: a caller's edit cannot reach the cache


def test_position_free_builders_build_once_for_every_index():
    description = DESCRIPTIONS["dp-sgd-poisson"]
    _built.cache_clear()
    for index in (1, 7, 50, None):
        claims_for(description, index)
    assert _built.cache_info().misses == 1


def test_evaluated_claims_are_kept_and_match_the_claims():
    description = DESCRIPTIONS["pnsgd"]
    grid = (0.0, 1.0, 2.0)
    entries = evaluated_claims(description, 3, delta=1e-5, profile_epsilons=grid)
    assert entries is evaluated_claims(description, 3, delta=1e-5, profile_epsilons=grid)
    for claim, entry in zip(claims_for(description, 3), entries):
        if entry.applicable:
            assert entry.epsilon == pytest.approx(claim.epsilon(1e-5))
            assert np.allclose(entry.profile["deltas"], [claim.delta(e) for e in grid])


def test_per_index_claims_follow_the_index():
    description = DESCRIPTIONS["pnsgd"]
    early, late = (next(c for c in claims_for(description, t) if c.name == "pabi-rdp") for t in (1, 10))
    assert early.index == 1 and late.index == 10
    assert early.epsilon(1e-5) < late.epsilon(1e-5)  # earlier records gain more from the later steps
