"""Tight accountants from Google's dp-accounting: PLD for Poisson sampling, RDP without replacement.

These give the best valid upper bounds the toolkit knows for compositions of
subsampled Gaussian steps:

* Poisson sampling (add/remove, or replace-one): a privacy loss distribution,
  discretised pessimistically (dp-accounting's ``PLDAccountant``,
  connect-the-dots), so the epsilon it reports is an upper bound
  (docs/theory.md 2.6).
* Sampling without replacement (replace-one): RDP of Wang, Balle,
  Kasiviswanathan 2019, Thm 27 (dp-accounting's ``RdpAccountant`` with a
  ``SampledWithoutReplacementDpEvent``), converted to (epsilon, delta) by
  dp-accounting's conversion.

Accountants are cached by their parameters, so the claims of many audits of
one mechanism compose once.
"""

from __future__ import annotations

import functools
import logging

import numpy as np

from dpaudit.mechanisms.accounting.claims import Claim, delta_for_epsilon, not_applicable

__all__ = ["PLD_CITATION", "WOR_CITATION", "pld_claim", "wor_gaussian_rdp", "wor_rdp_claim"]

PLD_CITATION = ("privacy loss distribution of the Poisson-subsampled Gaussian, pessimistic discretisation "
                "5e-4 (Koskela et al. 2020; Doroshenko et al. 2022; dp-accounting PLDAccountant)")
WOR_CITATION = ("Wang, Balle, Kasiviswanathan 2019, Thm 27 (sampling without replacement), "
                "dp-accounting RdpAccountant")
MAX_BUCKETS = 2_000_000  # a PLD wider than this (tiny noise multipliers) is not built
DISCRETISATION = 5e-4  # pessimistic at any step; 5e-4 stays within 0.1% of 1e-4 and is 3-5x faster


@functools.lru_cache(maxsize=32)
def _pld(sampling_rate: float, noise_multiplier: float, steps: int, relation: str = "add-remove"):
    # dp-accounting takes about a second to import: it loads with the first tight claim
    from dp_accounting import NeighboringRelation, dp_event
    from dp_accounting.pld import pld_privacy_accountant

    neighbours = NeighboringRelation.REPLACE_ONE if relation == "replace-one" else NeighboringRelation.ADD_OR_REMOVE_ONE
    accountant = pld_privacy_accountant.PLDAccountant(neighbours, value_discretization_interval=DISCRETISATION)
    accountant.compose(dp_event.PoissonSampledDpEvent(sampling_rate, dp_event.GaussianDpEvent(noise_multiplier)),
                       steps)
    return accountant


@functools.lru_cache(maxsize=32)
def _wor(dataset_size: int, sample_size: int, noise_multiplier: float, steps: int):
    # dp-accounting takes about a second to import: it loads with the first tight claim
    from dp_accounting import NeighboringRelation, dp_event
    from dp_accounting.rdp import rdp_privacy_accountant

    accountant = rdp_privacy_accountant.RdpAccountant(neighboring_relation=NeighboringRelation.REPLACE_ONE)
    accountant.compose(dp_event.SampledWithoutReplacementDpEvent(
        dataset_size, sample_size, dp_event.GaussianDpEvent(noise_multiplier)), steps)
    return accountant


def wor_gaussian_rdp(orders, *, dataset_size: int, sample_size: int, noise_multiplier: float,
                     steps: int = 1) -> np.ndarray:
    """RDP curve of ``steps`` Gaussian steps on samples of ``sample_size`` of ``dataset_size`` (replace-one).

    dp-accounting's ``RdpAccountant`` with a ``SampledWithoutReplacementDpEvent``: Wang, Balle,
    Kasiviswanathan 2019, Thm 27 at integer orders, their Corollary 10 (interpolating the cumulant)
    between them. ``noise_multiplier`` is the noise standard deviation over the replace-one
    sensitivity of one step's sum. The same neighbouring relation as the Thm 9 bound it replaces
    (replace-one, a fixed-size sample without replacement, ``n`` public); Thm 27 is never looser.
    """
    # dp-accounting takes about a second to import: it loads with the first tight claim
    from dp_accounting import NeighboringRelation, dp_event
    from dp_accounting.rdp import rdp_privacy_accountant

    accountant = rdp_privacy_accountant.RdpAccountant(
        orders=[float(order) for order in np.atleast_1d(orders)], neighboring_relation=NeighboringRelation.REPLACE_ONE)
    accountant.compose(dp_event.SampledWithoutReplacementDpEvent(
        int(dataset_size), int(sample_size), dp_event.GaussianDpEvent(float(noise_multiplier))), int(steps))
    return accountant.rdp


def _quiet(fn):
    """dp-accounting logs warnings through the root logger; keep them out of reports and CLI output."""
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        logger = logging.getLogger()
        level = logger.level
        logger.setLevel(logging.ERROR)
        try:
            return fn(*args, **kwargs)
        finally:
            logger.setLevel(level)
    return wrapped


def pld_claim(name: str, *, sampling_rate: float, noise_multiplier: float, steps: int,
              relation: str = "add-remove") -> Claim:
    """``steps`` Poisson-subsampled Gaussian steps, by PLD, for ``relation`` (``"add-remove"`` or
    ``"replace-one"``: the record in the batch with probability ``sampling_rate`` is replaced by another).

    ``noise_multiplier`` is the noise standard deviation over the add/remove
    sensitivity of one step's sum (a replaced record moves it by up to twice that).
    """
    # the Gaussian privacy loss spans about mu^2 / 2 + 10 mu (mu = 1 / z, twice that replacing) each side of zero
    mu = (2.0 if relation == "replace-one" else 1.0) / noise_multiplier
    buckets = (mu * mu / 2 + 10 * mu) / DISCRETISATION
    if buckets > MAX_BUCKETS:
        return not_applicable(name, PLD_CITATION, relation,
                              f"noise multiplier {noise_multiplier:.3g} is too small for a PLD grid of "
                              f"{DISCRETISATION:g} ({buckets:.2g} buckets); the RDP claims still apply")
    try:
        accountant = _quiet(_pld)(float(sampling_rate), float(noise_multiplier), int(steps), relation)
    except Exception as exc:  # noqa: BLE001 - an older dp-accounting refuses some relations (UnsupportedEventError)
        if type(exc).__name__ != "UnsupportedEventError":
            raise
        return not_applicable(name, PLD_CITATION, relation,
                              f"the installed dp-accounting does not account Poisson-subsampled Gaussian steps under "
                              f"{relation} neighbours ({type(exc).__name__}); a newer release does")
    return Claim(name, PLD_CITATION, relation,
                 epsilon_fn=_quiet(lambda delta: float(accountant.get_epsilon(delta))),
                 delta_fn=_quiet(lambda epsilon: float(accountant.get_delta(epsilon))))


def wor_rdp_claim(name: str, *, dataset_size: int, sample_size: int, noise_multiplier: float,
                  steps: int) -> Claim:
    """``steps`` Gaussian steps on samples of ``sample_size`` of ``dataset_size`` records (replace-one).

    ``noise_multiplier`` is the noise standard deviation over the replace-one
    sensitivity of one step's sum (twice the clipping norm).
    """
    try:
        accountant = _quiet(_wor)(int(dataset_size), int(sample_size), float(noise_multiplier), int(steps))
    except ValueError as exc:  # its series fails at large noise multipliers (a math domain error past about 1e9)
        return not_applicable(name, WOR_CITATION, "replace-one",
                              f"dp-accounting's without-replacement RDP fails at noise multiplier "
                              f"{noise_multiplier:.3g} ({exc}); the other claims still apply")
    epsilon_fn = _quiet(lambda delta: float(accountant.get_epsilon(delta)))
    # delta(eps) by bisection on the same epsilon(delta): dp-accounting's RDP get_delta uses another
    # conversion, and the two modes of a claim must agree (the property test checks it)
    return Claim(name, WOR_CITATION, "replace-one", epsilon_fn=epsilon_fn,
                 delta_fn=lambda epsilon: delta_for_epsilon(epsilon_fn, epsilon))
