"""jax_privacy's own figures for a DP-MF training, listed as that library's claims (docs/theory.md 12.4).

jax_privacy 2.0 states a matrix-factorisation training's privacy in two
steps: the strategy's multi-participation sensitivity from its own functions
(``sensitivity.get_sensitivity_banded`` for a ``C`` banded within the
separation, ``matrix_factorization.toeplitz.minsep_sensitivity_squared`` for a
Toeplitz one, ``sensitivity.get_min_sep_sensitivity_upper_bound`` otherwise), then
``accounting.SingleReleaseTrainingAccountant`` (PLD) on one Gaussian release
whose noise multiplier is ``sigma / sensitivity``. The claim here makes the
same calls, with ``min_sep`` the cyclic period and ``max_participations`` the
epochs, under zero-out (the library's relation); its citation gives the
library's sensitivity beside dpaudit's exact one.

jax_privacy is imported only here, on the first DP-MF claim, and is optional
(``pip install -e ".[jax]"``); without it the claim is listed as not
applicable with that reason. The jax_privacy adapter
(``mechanisms.adapters.jax_privacy``) reads the same functions.

References
----------
Choquette-Choo et al., "(Amplified) Banded Matrix Factorization", NeurIPS
2023 (Alg. 3 and 4 of arXiv:2306.08153 are ``get_sensitivity_banded`` and
``get_min_sep_sensitivity_upper_bound``); arXiv:2405.13763, Thm 2 (the
Toeplitz closed form, as ``jax_privacy/matrix_factorization/toeplitz.py``
cites it).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from dpaudit.mechanisms.accounting.claims import Claim, not_applicable
from dpaudit.mechanisms.accounting.descriptions import MatrixFactorizationTraining
from dpaudit.mechanisms.accounting.participation import bandwidth
from dpaudit.mechanisms.accounting.strategies import lower_matrix

__all__ = ["AccountantProfile", "JAX_PRIVACY_VERSIONS", "amplified_claim", "jax_privacy_claim", "library_sensitivity",
           "toeplitz_coefficients", "x64"]

NAME = "jax-privacy"
AMPLIFIED = ("jax_privacy 2.0's amplified BandMF accounting (accounting.DpsgdTrainingAccountant with cycle_length, "
             "experimental.accounting.amplified_bandmf_event; Choquette-Choo et al. 2023, NeurIPS, Thm 4)")
CITATION = ("jax_privacy 2.0: the strategy's sensitivity from its matrix_factorization functions, epsilon from "
            "accounting.SingleReleaseTrainingAccountant (PLD) at noise multiplier sigma / sensitivity")
#: The jax_privacy releases whose functions are called as this module calls them.
JAX_PRIVACY_VERSIONS = ("2.0",)


def _library():
    """jax_privacy's accounting module and version, or ``None`` and the reason it cannot be used."""
    try:
        # jax_privacy (and jax under it) is optional and takes seconds to import: on the first DP-MF claim only
        import jax_privacy
        from jax_privacy import accounting
    except ImportError:
        return None, "jax_privacy is not installed (pip install -e \".[jax]\")"
    version = getattr(jax_privacy, "__version__", "?")
    if not any(version == v or version.startswith(v + ".") for v in JAX_PRIVACY_VERSIONS):
        return None, (f"jax_privacy {version} is installed; its figures are read for versions "
                      f"{', '.join(v + '.x' for v in JAX_PRIVACY_VERSIONS)} only")
    return (accounting, version), ""


def x64(jax: Any) -> Any:
    """jax's float64 context (its name moved between releases)."""
    switch = getattr(jax, "enable_x64", None)
    if switch is None:  # older jax releases keep it in jax.experimental only
        # the older home of the same context manager, on the path of those releases only
        from jax.experimental import enable_x64 as switch
    return switch(True)


def toeplitz_coefficients(lower: np.ndarray) -> np.ndarray | None:
    """``C[:, 0]`` without its trailing zeros when every diagonal of ``C`` is constant, else ``None``."""
    n = lower.shape[0]
    scale = float(np.abs(lower).max()) or 1.0
    for lag in range(n):
        diagonal = np.diagonal(lower, -lag)
        if np.abs(diagonal - diagonal[0]).max() > 1e-12 * scale:
            return None
    column = lower[:, 0]
    nonzero = np.flatnonzero(column)
    return column[: nonzero[-1] + 1] if nonzero.size else None


def library_sensitivity(lower: np.ndarray, min_sep: int, participations: int) -> tuple[float, str]:
    """jax_privacy's multi-participation L2 sensitivity of ``C`` (unit clipped gradient) and the call that gave it.

    ``get_sensitivity_banded`` where ``C`` is banded within ``min_sep`` (exact, Alg. 3 of arXiv:2306.08153);
    ``toeplitz.minsep_sensitivity_squared(coef, min_sep, max_participations, n=steps)`` for a Toeplitz ``C``
    with non-negative, non-increasing coefficients (Thm 2 of arXiv:2405.13763); otherwise
    ``get_min_sep_sensitivity_upper_bound`` (Alg. 4 of arXiv:2306.08153). Computed in float64.

    Raises
    ------
    ImportError
        Where jax_privacy is not installed.
    """
    # jax_privacy's own sensitivity functions: the figures are the library's, as called on this C
    import jax
    import jax.numpy as jnp
    from jax_privacy.matrix_factorization import sensitivity, toeplitz

    steps = lower.shape[0]
    with x64(jax):
        encoder = jnp.asarray(lower, dtype=jnp.float64)
        if bandwidth(lower) <= min_sep:
            try:
                value = sensitivity.get_sensitivity_banded(encoder, min_sep=min_sep,
                                                           max_participations=participations)
                return float(value), (f"sensitivity.get_sensitivity_banded(C, min_sep={min_sep}, "
                                      f"max_participations={participations})")
            except ValueError:  # X = C^T C is not banded within min_sep after all: the next rule
                pass
        coefficients = toeplitz_coefficients(lower)
        if coefficients is not None:
            try:
                squared = toeplitz.minsep_sensitivity_squared(jnp.asarray(coefficients), min_sep, participations,
                                                              n=steps)
                return math.sqrt(float(squared)), (f"toeplitz.minsep_sensitivity_squared(coef, min_sep={min_sep}, "
                                                   f"max_participations={participations}, n={steps})")
            except ValueError:  # negative or increasing coefficients: the closed form does not hold
                pass
        value = sensitivity.get_min_sep_sensitivity_upper_bound(encoder, min_sep=min_sep,
                                                                max_participations=participations)
        return float(value), (f"sensitivity.get_min_sep_sensitivity_upper_bound(C, min_sep={min_sep}, "
                              f"max_participations={participations})")


class AccountantProfile:
    """``SingleReleaseTrainingAccountant`` (PLD) at one noise multiplier: one ``GaussianDpEvent``.

    ``epsilon(delta)`` is the accountant's ``compute_epsilon``; ``delta(epsilon)`` asks the PLD accountant its
    config builds, composed with the same event (the accountant itself answers epsilon only). Answers are kept.
    """

    def __init__(self, noise_multiplier: float, steps: int, records: int, batch: int) -> None:
        self.noise_multiplier, self.steps, self.records, self.batch = noise_multiplier, steps, records, batch
        self._epsilons: dict[float, float] = {}
        self._composed: Any = None

    def epsilon(self, delta: float) -> float:
        if delta <= 0.0:
            return math.inf
        if delta >= 1.0:
            return 0.0
        if delta not in self._epsilons:
            # jax_privacy's accountant: the library's figure, computed by the library
            from jax_privacy import accounting

            accountant = accounting.SingleReleaseTrainingAccountant(
                dp_accountant_config=accounting.PldAccountantConfig())
            params = accounting.DpParams(noise_multipliers=self.noise_multiplier, num_samples=self.records,
                                         batch_size=self.batch, delta=float(delta))
            self._epsilons[delta] = float(accountant.compute_epsilon(num_updates=self.steps, dp_params=params))
        return self._epsilons[delta]

    def delta(self, epsilon: float) -> float:
        if self._composed is None:
            # the same PLD accountant jax_privacy's config builds, and the event its accountant composes
            import dp_accounting
            from jax_privacy import accounting

            self._composed = accounting.PldAccountantConfig().create_accountant()
            self._composed.compose(dp_accounting.GaussianDpEvent(self.noise_multiplier))
        return float(self._composed.get_delta(float(epsilon)))


def jax_privacy_claim(description: MatrixFactorizationTraining, exact_sensitivity: float,
                      index: int | None = None, *, attained: bool = True) -> Claim:
    """jax_privacy's epsilon for a dp-mf training (zero-out), or why it is not given; ``exact_sensitivity`` is
    dpaudit's value for the worst cyclic pattern (``attained``: exact, else an upper bound)."""
    if description.strategy.kind == "tree":
        return not_applicable(NAME, CITATION, "zero-out", "jax_privacy 2.0 has no tree aggregation", index)
    if description.selection != "cyclic":
        return not_applicable(NAME, CITATION, "zero-out", "its fixed-order accounting assumes each record's steps "
                              "b-min-separated; reshuffled epochs are not", index)
    library, reason = _library()
    if library is None:
        return not_applicable(NAME, CITATION, "zero-out", reason, index)
    citation, profile = _figures(description, exact_sensitivity, attained, library[1])
    return Claim(NAME, citation, "zero-out", index=index, epsilon_fn=profile.epsilon, delta_fn=profile.delta)


@functools.lru_cache(maxsize=64)
def _figures(description: MatrixFactorizationTraining, exact_sensitivity: float, attained: bool,
             version: str) -> tuple[str, AccountantProfile]:
    """The library's sensitivity (in the citation) and its accountant, once per description (the same at
    every canary position)."""
    value, function = library_sensitivity(lower_matrix(description.strategy), description.epoch_steps,
                                          description.epochs)
    agree = "agrees with" if math.isclose(value, exact_sensitivity, rel_tol=1e-6) else "differs from"
    kind = "exact" if attained else "upper bound"
    citation = (f"{CITATION}; {function}: sensitivity {value:.6g}, which {agree} dpaudit's {kind} "
                f"{exact_sensitivity:.6g}; library {version}")
    return citation, AccountantProfile(description.noise_multiplier / value, description.steps,
                                       description.batch_size * description.epoch_steps, description.batch_size)


def amplified_claim(index: int | None = None) -> Claim:
    """jax_privacy's amplified BandMF figure: not applicable to dp-mf, whose batches are fixed slots (its theorem
    amplifies by cyclic Poisson sampling within each slot's group)."""
    return not_applicable("jax-privacy-amplified", AMPLIFIED, "zero-out",
                          "amplification needs cyclic Poisson sampling (each step's batch drawn from its group at a "
                          "rate q < 1); this training's batches are fixed, so only the unamplified figures apply",
                          index)
