"""Library adapters: each audits a real library object end to end against the object's own claim.

Every test skips cleanly when its library is not installed. Bounds are
certified at confidence 0.95 on fixed seeds, so "no violation" checks of
correct code can fail with probability at most 0.05 by design; they are
judged on seeds fixed here, and the violation checks use margins far above
the sampling error (8.6 certified against a claim of 1). OpenDP and
python-dp seed themselves from the operating system, so no seed fixes their
audits: their "no violation" checks certify at confidence 1 - 1e-6
(``UNSEEDED_CONFIDENCE``), which bounds the chance that a correct library
fails one by 1e-6.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

import dpaudit
from dpaudit.core.errors import ParameterError

UNSEEDED_CONFIDENCE = 1 - 1e-6  # a false "violation" at most once in a million runs


def _claim(result, name: str, relation: str = "replace-one") -> float:
    return next(c.epsilon for c in result.claims if c.name == name and c.relation == relation)


# -- diffprivlib ---------------------------------------------------------------------------------------
def test_diffprivlib_laplace_float_leak_is_certified_above_its_claim():
    mechanisms = pytest.importorskip("diffprivlib.mechanisms")
    from dpaudit.mechanisms.adapters import from_diffprivlib

    mech = from_diffprivlib(mechanisms.Laplace(epsilon=1.0, sensitivity=1.0))
    assert mech.params["epsilon"] == 1.0 and mech.params["library"] == "diffprivlib"
    result = dpaudit.audit(mech, dataset_pair=mech.neighbours(), score="float-bits", trials=20_000, seed=0)
    assert _claim(result, "diffprivlib-claim") == 1.0
    # value - scale * laplace in plain floats: the low bits tell 0 from 1 (8.6 certified at 10^5 trials)
    assert result.verdict == "violation" and result.epsilon_lower_bound > 4.0
    # the same outputs read as numbers (a Gaussian likelihood ratio) stay below the claim
    plain = dpaudit.audit(mech, dataset_pair=mech.neighbours(), score="gaussian", trials=20_000, seed=0)
    assert plain.epsilon_lower_bound < 1.0


def test_diffprivlib_blocks_are_reproducible_and_independent_of_workers():
    mechanisms = pytest.importorskip("diffprivlib.mechanisms")
    from dpaudit.mechanisms.adapters import from_diffprivlib

    obj = mechanisms.GaussianAnalytic(epsilon=1.0, delta=1e-5, sensitivity=1.0)
    one = from_diffprivlib(obj)
    two = from_diffprivlib(obj, workers=2)
    first = one.sample([[0.5]], trials=4_100, seed=3)
    assert first.shape == (4_100, 1)
    np.testing.assert_array_equal(first, one.sample([[0.5]], trials=4_100, seed=3))
    np.testing.assert_array_equal(first, two.sample([[0.5]], trials=4_100, seed=3))
    assert abs(first.mean() - 0.5) < 5 * first.std() / math.sqrt(len(first))  # 5 standard errors
    pickle.dumps(two)  # blocks travel to worker processes
    claim = next(c for c in one.claims() if c.relation == "replace-one")
    assert claim.epsilon(1e-5) == 1.0 and math.isinf(claim.epsilon(1e-6))  # nothing claimed below delta


def test_diffprivlib_refuses_records_outside_the_domain_and_non_numeric_mechanisms():
    mechanisms = pytest.importorskip("diffprivlib.mechanisms")
    from dpaudit.mechanisms.adapters import from_diffprivlib

    mech = from_diffprivlib(mechanisms.Laplace(epsilon=1.0, sensitivity=1.0))
    with pytest.raises(ParameterError, match=r"record domain \[0, 1\]"):
        mech.sample([[2.0]], trials=10, seed=0)
    with pytest.raises(ParameterError, match="sensitivity"):
        from_diffprivlib(mechanisms.Binary(epsilon=1.0, value0="a", value1="b"))
    wide = from_diffprivlib(mechanisms.Laplace(epsilon=1.0, sensitivity=1.0), record_domain=(0.0, 3.0))
    assert not any(c.applicable for c in wide.claims())  # the domain moves the sum by 3 > 1


# -- OpenDP --------------------------------------------------------------------------------------------
def _opendp():
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    return dp


def test_opendp_vector_laplace_is_consistent_with_its_privacy_map():
    dp = _opendp()
    from dpaudit.mechanisms.adapters import from_opendp

    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float)
    mech = from_opendp(space >> dp.m.then_laplace(scale=1.0), 1.0)
    assert mech.vectorised
    for score in ("gaussian", "float-bits"):
        result = dpaudit.audit(mech, dataset_pair=mech.neighbours(), score=score, trials=20_000, seed=0,
                               confidence=UNSEEDED_CONFIDENCE)
        assert _claim(result, "opendp-privacy-map") == pytest.approx(1.0)
        assert result.verdict != "violation", score  # OpenDP's float Laplace samples exactly, then rounds once
    assert result.epsilon_lower_bound < 1.0


def test_opendp_zcdp_gaussian_claim_is_converted_soundly():
    dp = _opendp()
    from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon
    from dpaudit.mechanisms.adapters import from_opendp

    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float)
    mech = from_opendp(space >> dp.m.then_gaussian(scale=2.0), 1.0)
    claim = next(c for c in mech.claims() if c.relation == "replace-one")
    exact = float(gaussian_epsilon(1e-5, 0.5))  # the Gaussian mechanism's own epsilon: mu = 1 / 2
    # rho = 1/8; the conversion may only be looser than the exact value, and not by much
    assert exact <= claim.epsilon(1e-5) <= 1.3 * exact
    result = dpaudit.audit(mech, dataset_pair=mech.neighbours(), trials=20_000, seed=1)
    assert 0 < result.epsilon_lower_bound < exact


def test_opendp_dataset_measurement_reads_both_relations():
    dp = _opendp()
    from dpaudit.mechanisms.adapters import from_opendp

    meas = (dp.vector_domain(dp.atom_domain(bounds=(0.0, 1.0))), dp.symmetric_distance()) >> dp.t.then_sum() \
        >> dp.m.then_laplace(scale=1.0)
    mech = from_opendp(meas, on="dataset", record_domain=(0.0, 1.0))
    claims = {c.relation: c.epsilon(1e-5) for c in mech.claims()}
    assert claims["add-remove"] == pytest.approx(1.0, rel=1e-6)
    assert claims["replace-one"] == pytest.approx(2.0, rel=1e-6)
    result = dpaudit.audit(mech, dataset_pair=mech.neighbours(), trials=5_000, seed=0,
                           confidence=UNSEEDED_CONFIDENCE)
    assert result.verdict != "violation"
    with pytest.raises(ParameterError, match="record_domain"):
        from_opendp(meas, on="dataset")


def laplace_mechanism(scale: float):
    """A module-level factory (what ``from_recipe`` pickles, by name)."""
    dp = _opendp()
    from dpaudit.mechanisms.adapters import from_opendp

    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float)
    return from_opendp(space >> dp.m.then_laplace(scale=scale), 1.0)


def test_an_opendp_mechanism_travels_to_workers_as_the_call_that_builds_it():
    _opendp()
    from dpaudit.mechanisms.adapters import from_recipe

    # a measurement holds C pointers: pickled (for a worker process), the mechanism is its recipe, built again
    mech = from_recipe(laplace_mechanism, 2.0)
    copy = pickle.loads(pickle.dumps(mech))
    assert copy.params == mech.params and copy.recipe == mech.recipe and copy.measurement is not mech.measurement
    assert copy.claims()[0].epsilon(1e-5) == pytest.approx(0.5)
    assert copy.sample(copy.neighbours()[0], trials=4, seed=0).shape == (4, 1)
    with pytest.raises(ParameterError, match="from_recipe: factory must return a library mechanism"):
        from_recipe(dict, scale=2.0)


# -- python-dp -----------------------------------------------------------------------------------------
def test_pydp_bounded_sum_against_its_claim():
    laplacian = pytest.importorskip("pydp.algorithms.laplacian")
    from dpaudit.mechanisms.adapters import from_pydp

    mech = from_pydp(laplacian.BoundedSum, epsilon=1.0, lower_bound=0, upper_bound=1, dtype="float")
    result = dpaudit.audit(mech, dataset_pair=mech.neighbours(), score="float-bits", trials=20_000, seed=0,
                           confidence=UNSEEDED_CONFIDENCE)
    assert _claim(result, "python-dp-claim") == 1.0
    assert result.verdict != "violation"  # python-dp snaps its noise to a granularity grid
    both = from_pydp(laplacian.BoundedSum, epsilon=1.0, lower_bound=-1, upper_bound=1, dtype="float")
    assert [c.applicable for c in both.claims() if c.relation == "replace-one"] == [False]
    with pytest.raises(ParameterError, match="lower_bound and upper_bound"):
        from_pydp(laplacian.BoundedSum, epsilon=1.0)


def test_diffprivlib_every_numeric_mechanism_class_wraps():
    mechanisms = pytest.importorskip("diffprivlib.mechanisms")
    from dpaudit.mechanisms.adapters import from_diffprivlib

    bounded = dict(epsilon=1.0, sensitivity=1.0, lower=-5, upper=5)
    objects = [mechanisms.Laplace(epsilon=1.0, sensitivity=1.0), mechanisms.LaplaceTruncated(**bounded),
               mechanisms.LaplaceBoundedDomain(**bounded), mechanisms.LaplaceFolded(**bounded),
               mechanisms.Gaussian(epsilon=0.5, delta=1e-5, sensitivity=1.0),
               mechanisms.GaussianAnalytic(epsilon=1.0, delta=1e-5, sensitivity=1.0),
               mechanisms.GaussianDiscrete(epsilon=1.0, delta=1e-5, sensitivity=1), mechanisms.Geometric(epsilon=1.0),
               mechanisms.GeometricTruncated(**{**bounded, "sensitivity": 1}),
               mechanisms.GeometricFolded(**{**bounded, "sensitivity": 1}),
               mechanisms.Snapping(**bounded), mechanisms.Staircase(epsilon=1.0, sensitivity=1.0)]
    for obj in objects:
        mech = from_diffprivlib(obj)
        out = mech.sample([[1.0]], trials=50, seed=0)
        assert out.shape == (50, 1) and np.all(np.isfinite(out)), type(obj).__name__
        assert mech.claims()[0].epsilon(1e-5) == obj.epsilon
    geometric = from_diffprivlib(mechanisms.Geometric(epsilon=1.0))  # integers: no float bits to leak
    result = dpaudit.audit(geometric, dataset_pair=geometric.neighbours(), trials=5_000, seed=0)
    assert result.verdict != "violation"
    with pytest.raises(ParameterError, match="randomises integers"):
        geometric.sample([[0.5]], trials=2, seed=0)
