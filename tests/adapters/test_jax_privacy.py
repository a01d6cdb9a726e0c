"""jax_privacy's matrix-factorisation privatizer as its users call it: their optax training, vmapped over keys.

The trainings here are linear models with a linear loss (each record's clipped gradient is minus the record,
clipped to the norm 1), plain SGD after ``matrix_factorization_privatizer``, batches in fixed cyclic order
(slot ``j`` holds records ``jB .. (j + 1)B - 1`` and is used at steps ``j, j + p, ...``). The final parameters
are then one Gaussian per coordinate, so dpaudit's values of the release are exact.

PR 238 (jax_privacy, merged 2026-05-27): ``toeplitz.minsep_sensitivity_squared(coef, min_sep, k)`` without
``n`` takes ``n = len(coef)`` and counts one participation. For Toeplitz (1, 0.5), p = 2, k = 8, stddev 2:
the sensitivity it gives is sqrt(1.25) = 1.118 against sqrt(8 * 1.25) = 3.162 (ratio sqrt(8)); at delta 1e-3
the claim is epsilon 1.546 (PLD) where the release's exact value is 5.587 and the last iterate's 5.025, whose
ideal audit at 18,000 certification trials reaches 3.65 (``gaussian_ceiling``): 2.4 times the claim.
"""

from __future__ import annotations

import itertools
import math
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("jax_privacy", reason="jax_privacy is an optional extra: pip install 'dpaudit[jax]'")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
from jax_privacy import clipping, noise_addition  # noqa: E402
from jax_privacy.matrix_factorization import banded, toeplitz  # noqa: E402
from scipy.optimize import brentq  # noqa: E402
from scipy.stats import norm  # noqa: E402

import dpaudit  # noqa: E402
from dpaudit.mechanisms.adapters import from_jax_privacy  # noqa: E402
from dpaudit.mechanisms.accounting.jax_privacy_claims import library_sensitivity  # noqa: E402
from dpaudit.mechanisms.accounting.participation import minsep_sensitivity  # noqa: E402
from dpaudit.mechanisms.adapters import jax_privacy_run as run  # noqa: E402

CLIP = 1.0


def linear_training(noising_matrix, *, dim: int, period: int, batch: int, steps: int, stddev: float, lr: float):
    """A user's training: linear loss ``-<w, x>``, the privatizer first, then the mean and SGD (optax)."""
    order = jnp.arange(period * batch).reshape(period, batch)[jnp.arange(steps) % period]
    gradient = clipping.clipped_grad(lambda w, x: -jnp.sum(x @ w), l2_clip_norm=CLIP, batch_argnums=1)

    def train(key, records):
        privatizer = noise_addition.matrix_factorization_privatizer(noising_matrix, stddev=stddev, prng_key=key)
        optimizer = optax.chain(privatizer, optax.scale(1.0 / batch), optax.sgd(lr))
        weights = jnp.zeros(dim)

        def step(carry, rows):
            weights, state = carry
            update, state = optimizer.update(gradient(weights, records[rows]), state, weights)
            return (optax.apply_updates(weights, update), state), None

        return jax.lax.scan(step, (weights, optimizer.init(weights)), order)[0][0]

    return train


def balle_wang_epsilon(mu: float, delta: float) -> float:
    """The exact epsilon of a Gaussian mechanism of ``mu`` at ``delta`` (Balle and Wang 2018, Thm 8)."""
    def gap(eps):
        return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2) - delta

    return brentq(gap, 0.0, 100.0, xtol=1e-14, rtol=1e-15)


def claim(result, name, relation="zero-out"):
    (entry,) = [c for c in result.claims if c.name == name and c.relation == relation]
    return entry


def test_a_banded_training_is_audited_as_called_below_every_claim():
    period, epochs, batch, dim, stddev = 4, 2, 4, 4, 1.5
    steps = period * epochs
    strategy = banded.ColumnNormalizedBanded.default(steps, 2)
    train = linear_training(strategy.inverse_as_streaming_matrix(), dim=dim, period=period, batch=batch,
                            steps=steps, stddev=stddev, lr=float(batch))
    training = from_jax_privacy(train, records=np.zeros((period * batch, dim)), steps=steps, epochs=epochs,
                                clip_norm=CLIP, stddev=stddev, noising_matrix=strategy.inverse_as_streaming_matrix(),
                                strategy=strategy, linear_sgd=True, canary=np.eye(dim)[0])
    result = dpaudit.audit(training, trials=20_000, delta=1e-5, seed=0, score="gaussian")
    assert result.canary["relation"] == "zero-out" and result.verdict == "consistent"
    library, exact = claim(result, "jax-privacy"), claim(result, "mf-releases")
    bound = result.epsilon_lower_bound
    assert 0 < bound < min(library.epsilon, exact.epsilon, claim(result, "mf-last-iterate").epsilon)
    assert "get_sensitivity_banded(C, min_sep=4, max_participations=2)" in library.citation
    assert "within 1e-6 relative" in library.citation and "covers dpaudit's value" in library.citation
    # the exact value by hand: C as jax_privacy materialises it (float32 entries), mu = max_slot |C 1_slot| / sigma
    lower = np.asarray(strategy.materialize(), dtype=np.float64)
    mu = max(np.linalg.norm(lower[:, [j, j + period]].sum(axis=1)) for j in range(period)) * CLIP / stddev
    # the adapter reads C as the inverse of the float32 noising matrix: equal up to float32 round-off
    assert exact.epsilon == pytest.approx(balle_wang_epsilon(mu, 1e-5), rel=1e-5)
    assert library.epsilon == pytest.approx(exact.epsilon, rel=2e-3)  # PLD's discretisation, pessimistic
    assert all(check["holds"] for check in training.assumptions())


def test_the_privatizer_noise_has_covariance_c_inverse_times_its_transpose():
    steps, stddev, trials = 8, 1.0, 20_000
    strategy = banded.ColumnNormalizedBanded.default(steps, 3)

    def noise_only(key, records):  # zero gradients: each step's output is the noise alone
        privatizer = noise_addition.matrix_factorization_privatizer(strategy.inverse_as_streaming_matrix(),
                                                                    stddev=stddev, prng_key=key)

        def step(state, _):
            noisy, state = privatizer.update(jnp.zeros(1), state)
            return state, noisy[0]

        return jax.lax.scan(step, privatizer.init(jnp.zeros(1)), None, length=steps)[1]

    training = from_jax_privacy(noise_only, records=np.zeros((steps, 1)), steps=steps, epochs=1, clip_norm=CLIP,
                                stddev=stddev, strategy=strategy, grid="none")
    noise = training.sample(trials=trials, seed=3)  # fixed seed: the check below is deterministic
    inverse = np.linalg.inv(np.asarray(strategy.materialize(), dtype=np.float64))
    expected = stddev**2 * inverse @ inverse.T
    observed = noise.T @ noise / trials  # the mean is known to be 0
    # each entry's sampling standard error: sqrt((K_ii K_jj + K_ij^2) / T) for Gaussian noise; 5 errors over the
    # 64 entries fail a correct privatizer with probability below 1e-4
    error = np.sqrt((np.outer(np.diag(expected), np.diag(expected)) + expected**2) / trials)
    assert np.max(np.abs(observed - expected) / error) < 5
    # the 2.0.0 docstring's M^T M (the transpose) is told apart at this size
    assert np.max(np.abs(observed - stddev**2 * inverse.T @ inverse) / error) > 10


def test_pr_238_sensitivity_without_n_is_below_the_exact_value_and_the_audit_flags_it():
    period, epochs, batch, dim, stddev, delta = 2, 8, 4, 4, 2.0, 1e-3
    steps, coef = period * epochs, jnp.array([1.0, 0.5])
    # the bug: n omitted, so n = len(coef) = 2 steps and one participation are counted
    buggy = math.sqrt(float(toeplitz.minsep_sensitivity_squared(coef, min_sep=period, max_participations=epochs)))
    assert buggy == pytest.approx(math.sqrt(1.25))
    train = linear_training(toeplitz.inverse_as_streaming_matrix(coef), dim=dim, period=period, batch=batch,
                            steps=steps, stddev=stddev, lr=float(batch))
    training = from_jax_privacy(train, records=np.zeros((period * batch, dim)), steps=steps, epochs=epochs,
                                clip_norm=CLIP, stddev=stddev, noising_matrix=toeplitz.inverse_as_streaming_matrix(coef),
                                sensitivity=buggy, linear_sgd=True, canary=np.eye(dim)[0])
    claims = {(c.name, c.relation): c for c in training.claims()}
    stated = claims["jax-privacy-given-sensitivity", "zero-out"].epsilon(delta)
    exact = claims["mf-releases", "zero-out"].epsilon(delta)
    assert stated == pytest.approx(1.546, abs=1e-3) and exact == pytest.approx(5.587, abs=1e-3)
    assert claims["jax-privacy", "zero-out"].epsilon(delta) >= exact  # jax_privacy's own call, with n, is right
    assert "BELOW" in claims["jax-privacy-given-sensitivity", "zero-out"].citation
    checks = {check["name"]: check["holds"] for check in training.assumptions()}
    assert checks == {"participation": True, "strategy": True, "library-sensitivity": True,
                      "given-sensitivity": False, "relation": True}
    with pytest.raises(dpaudit.PrivacyViolation) as caught:
        dpaudit.assert_private(training, epsilon=stated, delta=delta, trials=20_000, seed=0, score="gaussian")
    result = caught.value.result
    assert result.epsilon_lower_bound > stated and result.conformance["points_at"] == ["given-sensitivity"]


@pytest.fixture
def fresh_modules():
    """The adapter keeps the libraries once found: clear that before and after a test that hides them."""
    run.jax_modules.cache_clear()
    yield
    run.jax_modules.cache_clear()


def _one_line(excinfo) -> str:
    message = str(excinfo.value)
    assert "\n" not in message
    return message


def test_bad_arguments_are_refused_in_one_line_naming_them():
    steps, inverse = 4, toeplitz.inverse_as_streaming_matrix(jnp.array([1.0, 0.5]))
    train = linear_training(inverse, dim=2, period=2, batch=1, steps=steps, stddev=1.0, lr=1.0)
    good = dict(records=np.zeros((2, 2)), steps=steps, epochs=2, clip_norm=1.0, stddev=1.0, noising_matrix=inverse)
    cases = [
        (dict(train=3), "train must be a function"),
        (dict(stddev=1.0, noise_multiplier=1.0), "give stddev"),
        (dict(stddev=-1.0), "stddev must be"),
        (dict(noising_matrix=None), "give noising_matrix"),
        (dict(noising_matrix=np.eye(3)), "noising_matrix must be steps x steps = 4 x 4"),
        (dict(strategy=np.ones((4, 4))), "strategy must be finite and lower-triangular"),
        (dict(epochs=3), "steps must be a multiple of epochs"),
        (dict(min_separation=5), "min_separation must be <= 4"),
        (dict(order="minsep"), "order must be one of"),
        (dict(order="min-sep"), "order='min-sep' needs min_separation"),
        (dict(clip_norm=0.0), "clip_norm must be"),
        (dict(grid=0.3), "grid must be a power of two"),
        (dict(canary=[1.0, 2.0, 3.0]), "canary must be one record of 2"),
        (dict(records=np.zeros((3, 2)), canary=[1.0, 0.0]), "fill the 2 batches"),
        (dict(train=lambda key, records: records.sum() + jnp.dot(records[0], jnp.ones(5))), "train(key, records)"),
    ]
    for change, expected in cases:
        arguments = {"train": train, **good, **change}
        with pytest.raises(dpaudit.ParameterError) as caught:
            from_jax_privacy(**arguments)
        assert expected in _one_line(caught), (change, str(caught.value))


def test_an_unsupported_or_missing_jax_privacy_is_refused(monkeypatch, fresh_modules):
    monkeypatch.setattr(run, "library_version", lambda module: "2.1.0")
    with pytest.raises(dpaudit.ParameterError) as caught:
        run.jax_modules()
    assert _one_line(caught) == ("from_jax_privacy supports jax_privacy >=2.0,<2.1 (the 2.0.x API), got "
                                 "jax_privacy 2.1.0")
    run.jax_modules.cache_clear()
    monkeypatch.setitem(sys.modules, "jax_privacy", None)  # import jax_privacy now raises ImportError
    with pytest.raises(dpaudit.ParameterError) as caught:
        from_jax_privacy(lambda key, records: records, records=np.zeros((1, 1)), steps=1, epochs=1, clip_norm=1.0,
                         stddev=1.0, strategy=np.eye(1))
    assert "dpaudit[jax]" in _one_line(caught)


def test_import_dpaudit_and_the_adapter_module_load_no_jax():
    code = ("import sys, dpaudit, dpaudit.mechanisms.adapters, dpaudit.mechanisms.adapters.jax_privacy\n"
            "assert not [m for m in sys.modules if m == 'jax' or m.startswith(('jax.', 'jax_privacy'))]\n")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert dpaudit.from_jax_privacy is from_jax_privacy  # the top-level name, imported on first use


def test_library_sensitivity_calls_jax_privacys_own_function_for_each_kind_of_c():
    steps, sep, k = 8, 2, 4
    banded_c = np.asarray(toeplitz.materialize_lower_triangular(jnp.array([1.0, 0.5]), steps), dtype=np.float64)
    long_c = np.asarray(toeplitz.materialize_lower_triangular(jnp.array([1.0, 0.5, 0.25]), steps), dtype=np.float64)
    signed_c = np.asarray(toeplitz.materialize_lower_triangular(jnp.array([1.0, -0.5, 0.25]), steps),
                          dtype=np.float64)
    expected = {"banded": (banded_c, "get_sensitivity_banded"), "toeplitz": (long_c, "minsep_sensitivity_squared"),
                "signed": (signed_c, "get_min_sep_sensitivity_upper_bound")}
    for kind, (lower, function) in expected.items():
        value, how = library_sensitivity(lower, sep, k)
        assert function in how, kind
        # dpaudit's own b-min-separation value over the same schema (an upper bound by the same charge where
        # C^T C has negative entries)
        ours = minsep_sensitivity(lower.T @ lower, k, sep)
        assert value == pytest.approx(math.sqrt(ours.squared), rel=1e-9), kind
    # the signed C's bound is attained by a one-dimensional model: signs over every 2-separated pattern
    gram = signed_c.T @ signed_c
    attained = max(signs @ gram[np.ix_(steps_, steps_)] @ signs
                   for r in range(1, k + 1) for steps_ in itertools.combinations(range(steps), r)
                   if all(b - a >= sep for a, b in zip(steps_, steps_[1:]))
                   for signs in map(np.array, itertools.product((1.0, -1.0), repeat=r)))
    assert library_sensitivity(signed_c, sep, k)[0] == pytest.approx(math.sqrt(attained), rel=1e-9)
    assert math.sqrt(float(toeplitz.minsep_sensitivity_squared(jnp.array([1.0, 0.5, 0.25]), sep, k, n=steps))) \
        == pytest.approx(library_sensitivity(long_c, sep, k)[0], rel=1e-6)


def test_without_a_canary_an_audit_takes_a_dataset_pair_and_min_sep_order_lists_its_bound():
    steps, inverse = 4, toeplitz.inverse_as_streaming_matrix(jnp.array([1.0, 0.5]))
    train = linear_training(inverse, dim=2, period=2, batch=1, steps=steps, stddev=1.0, lr=1.0)
    training = from_jax_privacy(train, records=np.eye(2), steps=steps, epochs=2, clip_norm=1.0, stddev=1.0,
                                noising_matrix=inverse, order="min-sep", min_separation=2)
    with pytest.raises(dpaudit.ParameterError, match="needs dataset_pair"):
        dpaudit.audit(training, trials=1_000)
    result = dpaudit.audit(training, dataset_pair=(np.eye(2), np.array([[1.0, 0.0], [0.0, 0.0]])), trials=2_000,
                           seed=0, score="gaussian")
    assert result.canary["relation"] == "replace-one" and result.verdict == "consistent"
    claims = {(c.name, c.relation): c for c in training.claims()}
    assert not claims["mf-releases", "zero-out"].applicable and "order='min-sep'" in claims["mf-releases",
                                                                                             "zero-out"].reason
    assert "b = 2, k = 2" in claims["mf-minsep", "zero-out"].citation
    assert claims["mf-minsep", "zero-out"].epsilon(1e-5) <= claims["jax-privacy", "zero-out"].epsilon(1e-5)


def test_trials_depend_on_the_seed_alone():
    steps, inverse = 4, toeplitz.inverse_as_streaming_matrix(jnp.array([1.0, 0.5]))
    train = linear_training(inverse, dim=2, period=2, batch=1, steps=steps, stddev=1.0, lr=1.0)
    small = from_jax_privacy(train, records=np.eye(2), steps=steps, epochs=2, clip_norm=1.0, stddev=1.0,
                             noising_matrix=inverse, trials_per_call=3)
    large = from_jax_privacy(train, records=np.eye(2), steps=steps, epochs=2, clip_norm=1.0, stddev=1.0,
                             noising_matrix=inverse)
    first = small.sample(trials=7, seed=11)
    assert first.dtype == np.float64 and first.shape == (7, 2)
    np.testing.assert_array_equal(first, large.sample(trials=7, seed=11))  # blocks of 3 or one call: the same
    np.testing.assert_array_equal(first / 2.0**-6, np.round(first / 2.0**-6))  # on float32's release grid
    assert not np.array_equal(first, large.sample(trials=7, seed=12))
