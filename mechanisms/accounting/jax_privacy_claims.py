"""jax_privacy's own figures for a DP-MF training, listed as that library's claims (docs/theory.md 12.4).

jax_privacy 2.0 states a matrix-factorisation training's privacy in two
steps: the strategy's multi-participation sensitivity from its own functions
(``matrix_factorization.toeplitz.minsep_sensitivity_squared`` for a Toeplitz
strategy, ``sensitivity.get_sensitivity_banded`` for a banded one,
``sensitivity.get_min_sep_sensitivity_upper_bound`` otherwise), then
``accounting.SingleReleaseTrainingAccountant`` (PLD) on one Gaussian release
whose noise multiplier is ``sigma / sensitivity``. The claim here makes the
same calls, with ``min_sep`` the cyclic period and ``max_participations`` the
epochs, under zero-out (the library's relation); its citation gives the
library's sensitivity beside dpaudit's exact one.

jax_privacy is imported only here, on the first DP-MF claim, and is optional
(``pip install -e ".[jax]"``); without it the claim is listed as not
applicable with that reason.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from dpaudit.mechanisms.accounting.claims import Claim, not_applicable
from dpaudit.mechanisms.accounting.descriptions import MatrixFactorizationTraining
from dpaudit.mechanisms.accounting.strategies import lower_matrix

__all__ = ["JAX_PRIVACY_VERSIONS", "jax_privacy_claim", "jax_privacy_sensitivity"]

NAME = "jax-privacy"
CITATION = ("jax_privacy 2.0: the strategy's sensitivity from its matrix_factorization functions, epsilon from "
            "accounting.SingleReleaseTrainingAccountant (PLD) at noise multiplier sigma / sensitivity")
#: The jax_privacy releases whose functions are called as this module calls them.
JAX_PRIVACY_VERSIONS = ("2.0",)


def _library():
    """jax_privacy's modules, or a reason why they cannot be used."""
    try:
        # jax_privacy (and jax under it) is optional and takes seconds to import: on the first DP-MF claim only
        import jax_privacy
        from jax_privacy import accounting
        from jax_privacy.matrix_factorization import sensitivity, toeplitz
    except ImportError:
        return None, "jax_privacy is not installed (pip install -e \".[jax]\")"
    version = getattr(jax_privacy, "__version__", "?")
    if not any(version == v or version.startswith(v + ".") for v in JAX_PRIVACY_VERSIONS):
        return None, (f"jax_privacy {version} is installed; its figures are read for versions "
                      f"{', '.join(v + '.x' for v in JAX_PRIVACY_VERSIONS)} only")
    return (accounting, sensitivity, toeplitz, version), ""


def jax_privacy_sensitivity(description: MatrixFactorizationTraining) -> tuple[float, str]:
    """The strategy's multi-participation sensitivity as jax_privacy computes it, and the function used.

    Raises
    ------
    ImportError
        When jax_privacy is not installed (or not a supported version).
    """
    library, reason = _library()
    if library is None:
        raise ImportError(reason)
    _, sensitivity, toeplitz, _ = library
    strategy = description.strategy
    separation, participations = description.epoch_steps, description.epochs
    if strategy.kind in ("identity", "toeplitz", "banded-sqrt"):
        coefficients = np.asarray(strategy.coefficients or (1.0,), dtype=float)
        try:
            squared = toeplitz.minsep_sensitivity_squared(coefficients, min_sep=separation,
                                                          max_participations=participations, n=strategy.steps)
            return math.sqrt(float(squared)), "toeplitz.minsep_sensitivity_squared"
        except ValueError:  # its checks refuse coefficients that are not non-negative and non-increasing
            pass
    lower = lower_matrix(strategy)
    try:
        value = sensitivity.get_sensitivity_banded(lower, min_sep=separation, max_participations=participations)
        return float(value), "sensitivity.get_sensitivity_banded"
    except ValueError:  # not banded within the separation
        value = sensitivity.get_min_sep_sensitivity_upper_bound(lower, min_sep=separation,
                                                                max_participations=participations)
        return float(value), "sensitivity.get_min_sep_sensitivity_upper_bound"


def jax_privacy_claim(description: MatrixFactorizationTraining, exact_sensitivity: float,
                      index: int | None = None) -> Claim:
    """jax_privacy's epsilon for this training (zero-out), or why it is not given."""
    if description.strategy.kind == "tree":
        return not_applicable(NAME, CITATION, "zero-out", "jax_privacy 2.0 has no tree aggregation", index)
    if description.selection != "cyclic":
        return not_applicable(NAME, CITATION, "zero-out", "its fixed-order accounting assumes each record's steps "
                              "b-min-separated; reshuffled epochs are not", index)
    library, reason = _library()
    if library is None:
        return not_applicable(NAME, CITATION, "zero-out", reason, index)
    try:
        value, function = jax_privacy_sensitivity(description)
    except (ValueError, TypeError) as exc:  # a strategy its functions refuse
        return not_applicable(NAME, CITATION, "zero-out", f"jax_privacy's sensitivity functions refuse this "
                              f"strategy: {exc}", index)
    accounting = library[0]
    multiplier = description.noise_multiplier / value
    agree = "agrees with" if math.isclose(value, exact_sensitivity, rel_tol=1e-6) else "differs from"
    citation = (f"{CITATION}; {function}: sensitivity {value:.6g}, which {agree} dpaudit's exact "
                f"{exact_sensitivity:.6g}; library {library[3]}")
    epsilon = functools.lru_cache(maxsize=64)(functools.partial(_epsilon, accounting, multiplier, description))
    return Claim(NAME, citation, "zero-out", index=index, epsilon_fn=epsilon,
                 delta_fn=functools.partial(_delta, multiplier))


def _epsilon(accounting, multiplier: float, description: MatrixFactorizationTraining, delta: float) -> float:
    params = accounting.DpParams(noise_multipliers=multiplier, num_samples=description.batch_size
                                 * description.epoch_steps, batch_size=description.batch_size, delta=float(delta))
    accountant = accounting.SingleReleaseTrainingAccountant(dp_accountant_config=accounting.PldAccountantConfig())
    return float(accountant.compute_epsilon(description.steps, params))


@functools.lru_cache(maxsize=64)
def _pld(multiplier: float):
    # dp-accounting takes about a second to import: it loads with the first library claim
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    return pld_privacy_accountant.PLDAccountant().compose(dp_accounting.GaussianDpEvent(multiplier))


def _delta(multiplier: float, epsilon: float) -> float:
    """``delta(eps)`` of the one Gaussian event the library's accountant composes (dp_accounting's PLD, which
    its ``PldAccountantConfig`` runs)."""
    return float(_pld(multiplier).get_delta(float(epsilon)))
