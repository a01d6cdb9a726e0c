"""Claims of DP-SGD and DP-LSSGD (last iterate; subsampled Gaussian accountants).

Poisson sampling is analysed for add/remove neighbours (sensitivity of the
averaged gradient ``L/m``), sampling without replacement for replace-one
neighbours (sensitivity ``2L/m``). The first claim is always the tightest
accountant (``accounting.tight``: PLD for Poisson sampling, WBK Thm 27 RDP
without replacement, which also gives the per-step RDP curve of the
bounded-domain bound); the paper's DP-LSSGD claim is compared with it.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from dpaudit.core.kinds import SHUFFLED
from dpaudit.mechanisms.accounting import iteration
from dpaudit.mechanisms.accounting.builders.builder import ClaimBuilder
from dpaudit.mechanisms.accounting.claims import Claim, delta_for_epsilon, not_applicable, rdp_claim
from dpaudit.mechanisms.accounting.descriptions import MinibatchNoisySgd
from dpaudit.mechanisms.accounting.lssgd import lssgd_claim_condition, lssgd_claim_epsilon
from dpaudit.mechanisms.accounting.profiles import gaussian_delta, gaussian_epsilon
from dpaudit.mechanisms.accounting.rdp import DEFAULT_ORDERS, subsampled_gaussian_rdp
from dpaudit.mechanisms.accounting.scheduled import is_scheduled, scheduled_claims
from dpaudit.mechanisms.accounting.shuffled_batches import CHUA, GAUSSIAN_EPOCHS, shuffled_claims
from dpaudit.mechanisms.accounting.subsampling import amplify_by_subsampling, base_epsilon
from dpaudit.mechanisms.accounting.tight import PLD_CITATION, WOR_CITATION, pld_claim, wor_gaussian_rdp, wor_rdp_claim

MTZ = "Mironov, Talwar, Zhang 2019 (Poisson-subsampled Gaussian RDP), converted by CKS Prop. 12"
NOTES = ("lecture notes: subsampling theorem (Balle et al. 2018) on the exact Gaussian step, "
         "composed over T steps (basic composition)")
BOUNDED = "Altschuler & Talwar 2022 technique (bounded domain, many steps; docs/theory.md 2.4 [check])"
LSSGD = "Wang et al. 2019 (DP-LSSGD), Thm 1, as stated in the paper"


def _relation(mech) -> str:
    return "add-remove" if mech.sampling == "poisson" else "replace-one"


def _step_rdp(mech, orders, noise_std: float, steps: int):
    """RDP of ``steps`` subsampled Gaussian steps with gradient noise ``noise_std``."""
    L = mech.loss.lipschitz
    if mech.sampling == "poisson":
        return subsampled_gaussian_rdp(orders, sample_rate=mech.sample_rate,
                                       noise_multiplier=noise_std * mech.batch_size / L, steps=steps)
    return wor_gaussian_rdp(orders, dataset_size=mech.n, sample_size=mech.batch_size,
                            noise_multiplier=mech.batch_size * noise_std / (2 * L), steps=steps)


def _tight_claim(mech) -> Claim:
    """The tightest accountant for the steps: PLD (Poisson) or WBK Thm 27 RDP (without replacement)."""
    L = mech.loss.lipschitz
    if mech.sampling == "poisson":  # add/remove: the sum moves by L, its noise has std noise_std * m
        return pld_claim("sgm-pld", sampling_rate=mech.sample_rate,
                         noise_multiplier=mech.noise_std * mech.batch_size / L, steps=mech.steps)
    # replace-one: the sum moves by 2L
    return wor_rdp_claim("wor-rdp-thm27", dataset_size=mech.n, sample_size=mech.batch_size,
                         noise_multiplier=mech.noise_std * mech.batch_size / (2 * L), steps=mech.steps)


def minibatch_claims(mech: MinibatchNoisySgd, index: int | None) -> list[Claim]:
    """The claims of DP-SGD, and for DP-LSSGD (``smoothing`` set) the paper's claim beside them; the same at
    every canary position."""
    return _sgd_claims(mech) if mech.smoothing is None else lssgd_claims(mech)


def _sgd_claims(mech: MinibatchNoisySgd) -> list[Claim]:
    loss = mech.loss
    if mech.sampling in SHUFFLED:
        return _shuffled_sgd_claims(mech)
    relation = _relation(mech)
    poisson = mech.sampling == "poisson"
    if not math.isfinite(loss.lipschitz):
        reason = f"the {loss.name} loss is not Lipschitz on K (domain={mech.region.kind!r})"
        accountants = [("sgm-pld", PLD_CITATION), ("sgm-rdp", MTZ)] if poisson else [("wor-rdp-thm27", WOR_CITATION)]
        return [not_applicable(n, c, relation, reason) for n, c in (
            *accountants, ("subsampling-composition", NOTES), ("bounded-domain-rdp", BOUNDED))]
    # without replacement the tight claim is the RDP accountant itself (dp-accounting's, WBK Thm 27)
    claims = [_tight_claim(mech)] + ([rdp_claim("sgm-rdp", MTZ, relation, DEFAULT_ORDERS,
                                                _step_rdp(mech, DEFAULT_ORDERS, mech.noise_std, mech.steps))]
                                     if poisson else [])
    factor = 1.0 if relation == "add-remove" else 2.0
    mu_step = factor * loss.lipschitz / (mech.batch_size * mech.noise_std)
    q, T = mech.sample_rate, mech.steps

    @functools.lru_cache(maxsize=4096)  # the claims are kept per description: audits reuse the profile
    def composed_epsilon(delta: float) -> float:
        step_eps = float(gaussian_epsilon(delta / (T * q), mu_step))  # per-step delta * q * T = delta
        return T * float(amplify_by_subsampling(step_eps, 0.0, q)[0])

    def composed_delta(epsilon: float) -> float:
        # the same theorem read the other way, in closed form: the per-step epsilon whose amplification is
        # epsilon / T, and T q delta_step at it; rounded up by a relative 1e-12, far above the few ulps of the
        # Gaussian profile's arithmetic, and never to 0 (a delta below the floats' range is the smallest float)
        step = base_epsilon(float(epsilon) / T, q)
        return max(T * q * float(gaussian_delta(step, mu_step)) * (1 + 1e-12), math.ulp(0.0))

    claims.append(Claim("subsampling-composition", NOTES, relation, epsilon_fn=composed_epsilon,
                        delta_fn=composed_delta))
    diameter = mech.region.diameter
    smooth = loss.smoothness == 0 or mech.eta <= 2 / loss.smoothness
    if mech.release == "iterates":
        claims.append(not_applicable("bounded-domain-rdp", BOUNDED, relation, ITERATES_RELEASED))
    elif not loss.convex or loss.own:
        claims.append(not_applicable("bounded-domain-rdp", BOUNDED, relation, _not_convex(mech)))
    elif not math.isfinite(diameter):
        claims.append(not_applicable("bounded-domain-rdp", BOUNDED, relation, "K is unbounded (domain='whole')"))
    elif not smooth:
        claims.append(not_applicable("bounded-domain-rdp", BOUNDED, relation,
                                     f"eta > 2/beta (eta={mech.eta}, beta={loss.smoothness:.6g})"))
    else:
        orders = np.arange(2.0, 129.0)
        cache: dict[float, np.ndarray] = {}

        def window_rdp(alphas, sigma2, horizon):
            if sigma2 not in cache:
                cache[sigma2] = _step_rdp(mech, alphas, sigma2, 1)
            return horizon * cache[sigma2]

        rdp = iteration.bounded_domain_rdp(orders, diameter=diameter, eta=mech.eta, sigma=mech.noise_std,
                                           steps=mech.steps, step_rdp=window_rdp, splits=24)
        claims.append(rdp_claim("bounded-domain-rdp", BOUNDED, relation, orders, rdp))
    return claims


def _not_convex(mech) -> str:
    """Why the amplification-by-iteration bound does not apply to a loss that is not (known to be) convex."""
    if mech.loss.own:
        return f"loss={mech.loss.label!r} is a loss of your own, not known to be convex and smooth (steps may expand)"
    return (f"the {mech.loss.label} loss is not convex: each step multiplies theta by 1 + eta beta > 1, so steps expand "
            f"and the contraction the bound needs fails (docs/theory.md 10)")


ITERATES_RELEASED = ("every iterate is released: this bound is for the last iterate alone (hidden intermediate "
                     "iterates, amplification by iteration)")


def _shuffled_sgd_claims(mech) -> list[Claim]:
    """Shuffled batches (zero-out): the Gaussian bound over epochs, Chua et al.'s lower bound, the Poisson value."""
    relation = "zero-out"
    L = mech.loss.lipschitz
    if not math.isfinite(L):
        reason = f"the {mech.loss.name} loss is not Lipschitz on K (domain={mech.region.kind!r})"
        return [not_applicable(name, cite, relation, reason) for name, cite in (
            ("gaussian-epochs", GAUSSIAN_EPOCHS), ("shuffle-lower-bound", CHUA))]
    # zero-out moves the batch sum by at most L; its noise has std noise_std * m
    claims = shuffled_claims(sigma=mech.noise_std * mech.batch_size / L, batches=mech.batches_per_epoch,
                             steps=mech.steps, reshuffle=mech.sampling == "shuffle", relation=relation)
    reason = ("analysed for Poisson or without-replacement batches; this mechanism shuffles"
              if mech.release != "iterates" else ITERATES_RELEASED)
    return claims + [not_applicable("bounded-domain-rdp", BOUNDED, relation, reason)]


def lssgd_claims(mech: MinibatchNoisySgd) -> list[Claim]:
    """DP-LSSGD: the DP-SGD accountants (smoothing is post-processing) and Thm 1 of the paper, compared."""
    claims = _sgd_claims(mech)
    if mech.sampling in SHUFFLED:
        return claims + [not_applicable("lssgd-paper-thm1", LSSGD, "zero-out",
                                        "Thm 1 analyses sampled batches; this mechanism shuffles")]
    accountant = claims[0].name
    L = mech.loss.lipschitz
    if not math.isfinite(L):
        return claims + [not_applicable("lssgd-paper-thm1", LSSGD, _relation(mech),
                                        claims[0].reason)]

    def epsilon_fn(delta: float) -> float:
        return lssgd_claim_epsilon(noise_std=mech.noise_std, delta=delta, steps=mech.steps,
                                   n=mech.n, lipschitz=L)

    def condition(epsilon, delta):
        # checked at the (eps, delta) pair the claim states, in either mode: delta(eps) is the delta
        # at which Thm 1 gives exactly eps, so both modes test the same pair
        if delta is None:
            delta = delta_for_epsilon(epsilon_fn, epsilon)
            if delta >= 1.0:
                return None  # vacuous (delta 1), reported as such
        eps = epsilon_fn(delta) if epsilon is None else epsilon
        if not lssgd_claim_condition(epsilon=eps, delta=delta, steps=mech.steps, n=mech.n,
                                     batch_size=mech.batch_size):
            return (f"Thm 1 assumes eps^2 <= 5 T log(1/delta) b^2 / n^2, violated at eps={eps:.4g} "
                    f"(T={mech.steps}, b={mech.batch_size}, n={mech.n}, delta={delta})")
        return None

    claims.append(Claim("lssgd-paper-thm1", LSSGD, _relation(mech), epsilon_fn=epsilon_fn,
                        delta_fn=lambda e: delta_for_epsilon(epsilon_fn, e), condition=condition, compare_with=accountant))
    return claims


def _scheduled(mech: MinibatchNoisySgd, data_a, data_b, relation: str, usual: list[Claim]) -> list[Claim] | None:
    """A scheduled canary's own claims (``accounting.scheduled``); ``None`` for a sampled canary."""
    if not is_scheduled(data_a, data_b):
        return None
    return scheduled_claims(mech, data_a, data_b, relation, usual)


BUILDERS = (ClaimBuilder("minibatch-noisy-sgd", (MinibatchNoisySgd,), minibatch_claims, per_index=False,
                         pair=_scheduled),)
