"""Seeded audits and library claims behind figures of docs/guide.md, asserted at the guide's printed precision.

The tests elsewhere that run these audits assert looser properties (a violation caught, a bound above twice
its claim); the guide quotes the figure itself. Each test here is cheap (a few seconds on one core) and
reruns the audit or the claim the guide describes with the guide's own settings and seed, so the figure in
the guide and its test cannot drift apart: ``tests/package/doc_figure_registry.py`` registers each figure
against the test here that holds its literal, and ``tests/package/test_doc_figures.py`` checks it.
"""

from __future__ import annotations

import numpy as np
import pytest

import dpaudit

DELTA = 1e-5


def _printed(value: float, decimals: int) -> str:
    """``value`` as the guide prints it: rounded to the nearest last digit."""
    return f"{value:.{decimals}f}"


def test_the_rounded_sum_certifies_the_guides_figure():
    """docs/guide.md, "Auditing your own code": the noisy sum released on a ``2^-12`` grid, audited as the
    block above it audits the sum in plain floats, certifies 1.11 with the projection score."""
    def noisy_sum(records, rng):
        value = np.clip(records[:, 0], -1.0, 1.0).sum() + rng.normal(0.0, 2.0)
        return [np.round(value * 4096) / 4096]

    S = np.zeros((10, 1))
    S_prime = S.copy()
    S_prime[0, 0] = 1.0
    mech = dpaudit.from_callable(noisy_sum, output_dim=1)
    result = dpaudit.audit(mech, dataset_pair=(S, S_prime), trials=20_000, delta=DELTA)
    assert (_printed(result.epsilon_lower_bound, 2), result.attack["score"]) == ("1.11", "projection")


def test_a_naive_float_laplace_is_certified_at_the_guides_figure():
    """docs/guide.md, "Mechanisms and their claims": a Laplace mechanism written as ``sum + noise`` in plain
    floats (scale 2 on the replace-one pair [1] against [-1]: true epsilon 1.0), 10^5 trials, seed 0: the
    float-bits score certifies 8.0 (``tests/statistical/test_families.py`` runs the same audit and asserts
    only that it is caught)."""
    def naive_laplace(records, rng):
        return [np.clip(records[:, 0], -1.0, 1.0).sum() + rng.laplace(0.0, 2.0)]

    naive = dpaudit.from_callable(naive_laplace, output_dim=1)
    result = dpaudit.audit(naive, dataset_pair=(np.array([[1.0]]), np.array([[-1.0]])), score="float-bits",
                           trials=100_000, delta=DELTA, seed=0)
    assert _printed(result.epsilon_lower_bound, 1) == "8.0"


def test_the_float_sum_search_certifies_the_guides_figure():
    """docs/guide.md, "Neighbour search": a naive sequential sum over ``[2^45, 2^45 + 1]`` is found on a large
    dataset and certified at 4.48 against its claim of 1 (the search of
    ``tests/audit/checks/test_search_records.py``, which asserts only a bound above 2)."""
    # the mechanism and its domain are that test's, so that both audit the same code
    from tests.audit.checks.test_search_records import HIGH, LOW, naive_sum

    mech = dpaudit.from_batched_callable(naive_sum, 1, record_domain=(LOW, HIGH))
    with np.errstate(all="ignore"):  # the gaussian score's fit overflows on outputs near 2^56
        found = dpaudit.search(mech, epsilon=1.0, relation="replace-one", trials=10_000, screen_trials=100, seed=0)
    assert found.violation and found.chosen["name"].startswith("large:")
    assert _printed(found.epsilon_lower_bound, 2) == "4.48"


def test_the_opacus_engines_claims_are_the_guides():
    """docs/guide.md, the DP-SGD zoo's table: what Opacus's engine reports at delta 1e-5 for the fixed batches
    in order and their twin (2.426), and for the weighted sampler under ``make_private_with_epsilon(1.0)`` and
    its twin (0.994); the zoo's own cases build each training as the table runs it."""
    pytest.importorskip("opacus")
    # the zoo's DP-SGD cases import torch: loaded by the one test that needs them
    from dpaudit.auditing.checks.zoo.dpsgd import DPSGD_ZOO

    expected = {"opacus-fixed-batches": "2.426", "opacus-fixed-batches:correct": "2.426",
                "opacus-weighted-sampler": "0.994", "opacus-weighted-sampler:correct": "0.994"}
    cases = {case.name: case for case in DPSGD_ZOO if case.name in expected}
    claims = {name: _printed(case.claim(case.build()[0]), 3) for name, case in cases.items()}
    assert claims == expected
