"""Claims of torch models trained by DP-SGD or DP-LSSGD (clipped per-example gradients).

Clipping every example's gradient to norm ``C`` bounds what one record adds
to a step's sum by ``C`` (add/remove, Poisson sampling) or ``2C``
(replace-one: a record replaced, under any sampling), whatever the model: the
subsampled Gaussian accountants apply with noise multiplier ``sigma`` (noise
``sigma C`` on the sum). Under Poisson sampling the rate ``q = m / n`` is
fixed from the configured ``n`` and used for both datasets of a pair (the
``S'`` of add/remove holds ``n - 1`` records), so the accountant asked at
either count answers for the same ``q``; a replaced record is accounted by
the replace-one PLD. Laplacian smoothing is post-processing. Bounds that
need a convex, Lipschitz, smooth loss and a projection (amplification by
iteration) are listed as not applicable, with the reason.

At a sampling rate of 1 (every record in every step: Poisson with ``m = n``,
or ``m = n`` without replacement) each step is a Gaussian mechanism on the
sum, and their composition, GDP ``mu = sqrt(T) / sigma`` (``2 sqrt(T) /
sigma`` replacing a record), is exact for the sequence of iterates and a
bound for the final model by post-processing: an applicable claim
(``full-batch-composition``). Below rate 1 the last-iterate value of
linear-loss training with the same parameters is listed as a labelled
reference (kind ``reference``), never used for a verdict.
"""

from __future__ import annotations

import dataclasses
import math

from dpaudit.core.kinds import SHUFFLED
from dpaudit.mechanisms.accounting.builders.builder import ClaimBuilder
from dpaudit.mechanisms.accounting.builders.iterative import multi_epoch_claims, pnsgd_claims
from dpaudit.mechanisms.accounting.builders.sgd import MTZ
from dpaudit.mechanisms.accounting.claims import Claim, not_applicable, rdp_claim
from dpaudit.mechanisms.accounting.descriptions import ClippedGradientTraining, MultiEpochNoisySgd
from dpaudit.mechanisms.accounting.last_iterate import MixtureLaws, count_mixture
from dpaudit.mechanisms.accounting.profiles import gaussian_delta, gaussian_epsilon
from dpaudit.mechanisms.accounting.rdp import DEFAULT_ORDERS, subsampled_gaussian_rdp
from dpaudit.mechanisms.accounting.shuffled_batches import shuffled_claims
from dpaudit.mechanisms.accounting.tight import pld_claim, wor_rdp_claim

__all__ = ["FULL_BATCH", "SURROGATE", "full_batch", "full_batch_laws", "model_claims", "pnsgd_model_claims",
           "surrogate_laws"]

SURROGATE = "last-iterate linear-loss surrogate (Steinke et al. 2024): a reference, not a bound"
PABI = "Feldman, Mironov, Talwar, Thakurta 2018 (privacy amplification by iteration), Thm 22/23"
FULL_BATCH = ("composition of the T released Gaussian steps at sampling rate 1: each step's clipped sum moves by "
              "at most C (2C replacing a record) under noise sigma C, GDP mu = sqrt(T) / sigma (twice that "
              "replacing) by Dong, Roth, Su 2022, Cor. 2; exact for the iterates, a bound for the final model by "
              "post-processing")


def model_claims(mech: ClippedGradientTraining, index: int | None) -> list[Claim]:
    """Claims of a trained model (``algorithm="pnsgd"``: :func:`pnsgd_model_claims`)."""
    if mech.algorithm == "pnsgd":
        return pnsgd_model_claims(mech, index)
    return _sgd_model_claims(mech)


def _sgd_model_claims(mech: ClippedGradientTraining) -> list[Claim]:
    """Claims of DP-SGD or DP-LSSGD training; the same for every canary position."""
    q, sigma, steps = mech.batch_size / mech.n, mech.noise_multiplier, mech.steps
    if mech.sampling in SHUFFLED:  # zero-out: the sum moves by C, its noise has std sigma C
        relation = "zero-out"
        claims = shuffled_claims(sigma=sigma, batches=mech.n // mech.batch_size, steps=steps,
                                 reshuffle=mech.sampling == "shuffle", relation=relation)
    elif mech.sampling == "poisson":
        relation = "add-remove"
        claims = [pld_claim("sgm-pld", sampling_rate=q, noise_multiplier=sigma, steps=steps),
                  rdp_claim("sgm-rdp", MTZ, relation, DEFAULT_ORDERS,
                            subsampled_gaussian_rdp(DEFAULT_ORDERS, sample_rate=q, noise_multiplier=sigma,
                                                    steps=steps)),
                  pld_claim("sgm-pld-replace", sampling_rate=q, noise_multiplier=sigma, steps=steps,
                            relation="replace-one")]
    else:
        relation = "replace-one"
        claims = [wor_rdp_claim("wor-rdp-thm27", dataset_size=mech.n, sample_size=mech.batch_size,
                                noise_multiplier=sigma / 2, steps=steps)]
    if full_batch(mech):
        claims += _full_batch_claims(mech)
    if mech.convex:
        reason = (f"needs a smooth convex Lipschitz loss whose gradient steps are projected onto a bounded "
                  f"convex set; model={mech.model} is trained on clipped per-example gradients without "
                  f"projection")
    else:
        reason = f"{mech.model_label} is not convex in its parameters"
    claims.append(not_applicable("pabi-per-index", PABI, relation, reason))
    return claims + _surrogate_claims(mech, relation)


def full_batch(mech: ClippedGradientTraining) -> bool:
    """True when every record joins every step (sampling rate 1, batches not shuffled; not pnsgd)."""
    return (mech.algorithm != "pnsgd" and mech.sampling not in SHUFFLED and mech.batch_size >= mech.n)


def full_batch_laws(mech: ClippedGradientTraining, relation: str) -> MixtureLaws:
    """The composition's laws at sampling rate 1 in units of ``C``: ``N(T, sigma^2 T)`` against ``N(0, ...)``
    (``N(-T, ...)`` replacing a record): what the claim ``full-batch-composition`` bounds, and the law of the
    statistical ceiling of any audit of such a training (a gradient canary attains it)."""
    sigma, steps = float(mech.noise_multiplier), int(mech.steps)
    return count_mixture(1.0, -1.0 if relation == "replace-one" else 0.0, steps=steps, rate=1.0,
                         std=sigma * math.sqrt(steps), citation=FULL_BATCH)


def _full_batch_claims(mech: ClippedGradientTraining) -> list[Claim]:
    """``full-batch-composition`` (add/remove) and ``full-batch-composition-replace`` (replace-one), for the relations
    a pair of this training may realise (exact GDP)."""
    relations = ("add-remove", "replace-one") if mech.sampling == "poisson" else ("replace-one",)
    claims = []
    for relation in relations:
        mu = (2.0 if relation == "replace-one" else 1.0) * math.sqrt(mech.steps) / mech.noise_multiplier
        name = "full-batch-composition" + ("-replace" if relation == "replace-one" else "")
        claims.append(Claim(name, FULL_BATCH, relation,
                            epsilon_fn=lambda delta, mu=mu: float(gaussian_epsilon(delta, mu)),
                            delta_fn=lambda epsilon, mu=mu: float(gaussian_delta(epsilon, mu))))
    return claims


def surrogate_laws(mech: ClippedGradientTraining) -> MixtureLaws:
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
        return count_mixture(1.0, -1.0, steps=uses, rate=1.0, std=sigma * math.sqrt(uses * mech.n),
                             citation=SURROGATE)
    opposite = -1.0 if mech.sampling != "poisson" else 0.0
    return count_mixture(1.0, opposite, steps=mech.steps, rate=mech.batch_size / mech.n,
                         std=sigma * math.sqrt(mech.steps), citation=SURROGATE)


def _surrogate_claims(mech: ClippedGradientTraining, relation: str) -> list[Claim]:
    """The labelled reference (none when every iterate is released: it describes the last one; none at sampling
    rate 1, where ``full-batch-composition`` is the applicable bound it would equal)."""
    if mech.release == "iterates" or full_batch(mech):
        return []
    laws = surrogate_laws(mech)
    return [Claim("last-iterate-surrogate", SURROGATE, relation, kind="reference", epsilon_fn=laws.epsilon,
                  delta_fn=laws.delta)]


GAUSSIAN_COMPOSITION = ("Gaussian mechanism per use (sensitivity 2C, noise sigma C), composed over the epochs "
                        "in GDP (Dong, Roth, Su 2022, Cor. 2)")


def pnsgd_model_claims(mech: ClippedGradientTraining, index: int | None) -> list[Claim]:
    """Claims of ``algorithm='pnsgd'``: GDP composition of every use of the record (any model, released
    iterates or not), and the amplification-by-iteration bounds of an equivalent ``pnsgd`` where they apply
    (``mech.iteration``: the ``pnsgd`` description with the same constants, or ``None`` and
    ``mech.iteration_reason``).
    """

    mu = 2 * math.sqrt(mech.epochs) / mech.noise_multiplier
    claims = [Claim("gaussian-composition", GAUSSIAN_COMPOSITION, "replace-one",
                    epsilon_fn=lambda delta: float(gaussian_epsilon(delta, mu)),
                    delta_fn=lambda epsilon: float(gaussian_delta(epsilon, mu)))]
    claims += _surrogate_claims(mech, "replace-one")
    if mech.iteration is None:
        return claims + [not_applicable("pabi-per-index", PABI, "replace-one", mech.iteration_reason)]
    model = mech.model_label
    iteration = (multi_epoch_claims if isinstance(mech.iteration, MultiEpochNoisySgd) else pnsgd_claims)(
        mech.iteration, index)
    return claims + [dataclasses.replace(claim, reason=claim.reason.replace("the linear loss", model))
                     for claim in iteration]


BUILDERS = (ClaimBuilder("model-training", (ClippedGradientTraining,), model_claims),)
