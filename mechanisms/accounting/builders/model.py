"""Claims of torch models trained by DP-SGD or DP-LSSGD (clipped per-example gradients).

Clipping every example's gradient to norm ``C`` bounds what one record adds
to a step's sum by ``C`` (add/remove, Poisson sampling) or ``2C``
(replace-one, sampling without replacement), whatever the model: the
subsampled Gaussian accountants apply with noise multiplier ``sigma`` (noise
``sigma C`` on the sum). Laplacian smoothing is post-processing. Bounds that
need a convex, Lipschitz, smooth loss and a projection (amplification by
iteration) are listed as not applicable, with the reason. The last-iterate
value of linear-loss training with the same parameters is listed as a
labelled reference (kind ``reference``), never used for a verdict.
"""

from __future__ import annotations

import dataclasses
import math

from dpaudit.mechanisms.accounting.builders.sgd import MTZ
from dpaudit.mechanisms.accounting.claims import Claim, not_applicable, rdp_claim
from dpaudit.mechanisms.accounting.last_iterate import MixtureLaws, count_mixture
from dpaudit.mechanisms.accounting.rdp import DEFAULT_ORDERS, subsampled_gaussian_rdp
from dpaudit.mechanisms.accounting.shuffled_batches import shuffled_claims
from dpaudit.mechanisms.accounting.tight import pld_claim, wor_rdp_claim
from dpaudit.core.kinds import SHUFFLED

__all__ = ["SURROGATE", "model_claims", "pnsgd_model_claims", "surrogate_laws"]

SURROGATE = "last-iterate linear-loss surrogate (Steinke et al. 2024): a reference, not a bound"
PABI = "Feldman, Mironov, Talwar, Thakurta 2018 (privacy amplification by iteration), Thm 22/23"


def model_claims(mech) -> list[Claim]:
    """Claims of a ``model`` mechanism; the same for every canary position."""
    q, sigma, steps = mech.batch_size / mech.n_records, mech.noise_multiplier, mech.steps
    if mech.sampling in SHUFFLED:  # zero-out: the sum moves by C, its noise has std sigma C
        relation = "zero-out"
        claims = shuffled_claims(sigma=sigma, batches=mech.n_records // mech.batch_size, steps=steps,
                                 reshuffle=mech.sampling == "shuffle", relation=relation)
    elif mech.sampling == "poisson":
        relation = "add-remove"
        claims = [pld_claim("sgm-pld", sampling_rate=q, noise_multiplier=sigma, steps=steps),
                  rdp_claim("sgm-rdp", MTZ, relation, DEFAULT_ORDERS,
                            subsampled_gaussian_rdp(DEFAULT_ORDERS, sample_rate=q, noise_multiplier=sigma,
                                                    steps=steps))]
    else:
        relation = "replace-one"
        claims = [wor_rdp_claim("wor-rdp-thm27", dataset_size=mech.n_records, sample_size=mech.batch_size,
                                noise_multiplier=sigma / 2, steps=steps)]
    if mech.convex:
        reason = (f"needs a smooth convex Lipschitz loss whose gradient steps are projected onto a bounded "
                  f"convex set; model={mech.model!r} is trained on clipped per-example gradients without "
                  f"projection")
    else:
        reason = f"{mech.model_label} is not convex in its parameters"
    claims.append(not_applicable("pabi-per-index", PABI, relation, reason))
    return claims + _surrogate_claims(mech, relation)


def surrogate_laws(mech) -> MixtureLaws:
    """The last-iterate laws of linear-loss training with this one's parameters (docs/theory.md 5.1).

    A gradient canary of norm ``C`` against nothing (Poisson, add/remove)
    or against ``-C`` (replace-one), the other records' gradients zero: in
    units of ``C``, ``Y = K + N(0, sigma^2 T)`` with the canary's count
    ``K ~ Binom(T, m/n)`` (one use per epoch, ``Y`` Gaussian, for pnsgd).
    Smoothing is invertible post-processing and changes nothing. With real
    losses the other records' gradients move and the clipped canary
    gradient may shrink, so this is the value of a simpler instance: a
    reference for what a white-box audit can approach, not a bound.
    """
    sigma = float(mech.noise_multiplier)
    if mech.algorithm == "pnsgd":
        uses = int(mech.epochs)
        return count_mixture(1.0, -1.0, steps=uses, rate=1.0, std=sigma * math.sqrt(uses * mech.n_records),
                             citation=SURROGATE)
    opposite = -1.0 if mech.sampling != "poisson" else 0.0
    return count_mixture(1.0, opposite, steps=mech.steps, rate=mech.batch_size / mech.n_records,
                         std=sigma * math.sqrt(mech.steps), citation=SURROGATE)


def _surrogate_claims(mech, relation: str) -> list[Claim]:
    """The labelled reference (none when every iterate is released: it describes the last one)."""
    if mech.output == "iterates":
        return []
    laws = surrogate_laws(mech)
    return [Claim("last-iterate-surrogate", SURROGATE, relation, kind="reference", epsilon_fn=laws.epsilon,
                  delta_fn=laws.delta)]


GAUSSIAN_COMPOSITION = ("Gaussian mechanism per use (sensitivity 2C, noise sigma C), composed over the epochs "
                        "in GDP (Dong, Roth, Su 2022, Cor. 2)")


def pnsgd_model_claims(mech, proxy, index) -> list[Claim]:
    """Claims of ``algorithm='pnsgd'``: GDP composition of every use of the record (any model, released
    iterates or not), and the amplification-by-iteration bounds of an equivalent ``pnsgd`` where they apply.

    ``proxy`` is ``(sampler, reason)`` from the mechanism: the ``pnsgd`` sampler with the same constants,
    or ``None`` and why the bounds do not apply.
    """
    from dpaudit.mechanisms.accounting.profiles import gaussian_delta, gaussian_epsilon

    mu = 2 * math.sqrt(mech.epochs) / mech.noise_multiplier
    claims = [Claim("gaussian-composition", GAUSSIAN_COMPOSITION, "replace-one",
                    epsilon_fn=lambda delta: float(gaussian_epsilon(delta, mu)),
                    delta_fn=lambda epsilon: float(gaussian_delta(epsilon, mu)))]
    sampler, reason = proxy
    claims += _surrogate_claims(mech, "replace-one")
    if sampler is None:
        return claims + [not_applicable("pabi-per-index", PABI, "replace-one", reason)]
    model = mech.model_label
    return claims + [dataclasses.replace(claim, reason=claim.reason.replace("the linear loss", model))
                     for claim in sampler.claims(index=index) if claim.kind != "exact-instance"]
