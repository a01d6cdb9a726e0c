"""What a jax_privacy training's claims read, and its assumptions checked (``mechanisms.adapters.jax_privacy``).

:func:`read_facts` materialises the two ``C`` (the noise the privatizer was
given, the strategy the claim is for), the privatizer's ``stddev``, dpaudit's
description of the training and values for the same schemas, and
jax_privacy's own sensitivity; the other functions turn them into the
library's claims (:func:`accounted`), dpaudit's values (:func:`dpaudit_guarantees`)
and the conformance checks (:func:`assumptions`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from dpaudit.mechanisms.accounting.builders.matrix import RELATION_FACTORS, matrix_claims, release_mu
from dpaudit.mechanisms.accounting.descriptions import (
    ConvexSet,
    InapplicableGuarantee,
    LossTerms,
    MatrixFactorizationTraining,
    ProfileGuarantee,
)
from dpaudit.mechanisms.accounting.jax_privacy_claims import AccountantProfile, library_sensitivity, x64
from dpaudit.mechanisms.accounting.participation import PatternValue, minsep_sensitivity
from dpaudit.mechanisms.accounting.strategies import dense_strategy, factor
from dpaudit.mechanisms.adapters.base import library_version
from dpaudit.mechanisms.adapters.jax_privacy_run import cleaned, inverse, jax_modules, materialise

__all__ = ["DPAUDIT_VALUES", "Facts", "accounted", "assumptions", "checked", "dpaudit_guarantees", "read_facts"]

_AGREE = 1e-6  # relative agreement of a library sensitivity with dpaudit's value for the same schema
#: dpaudit's own values of the release, read from ``accounting.builders.matrix`` (its other claims are not ours)
DPAUDIT_VALUES = ("mf-releases", "mf-minsep", "mf-last-iterate")


@dataclasses.dataclass(frozen=True, slots=True)
class Facts:
    """What the claims read, computed once per training: the two ``C`` (of the noise and of the claim), the
    dpaudit description, jax_privacy's sensitivity and dpaudit's values for the same schemas."""

    noise_lower: np.ndarray
    claim_lower: np.ndarray
    stddev: float
    description: MatrixFactorizationTraining
    library: tuple[float, str]
    schema: PatternValue  # dpaudit's b-min-separation value of the claim's C at (min_sep, k)
    exact: PatternValue  # dpaudit's value of the release: the worst cyclic slot (or the min-sep schema)
    consistent: bool  # the claim's C is the inverse of the noising matrix (or only one was given)


def read_facts(training) -> Facts:
    """What the claims of a jax_privacy training read, computed once (``JaxPrivacyTraining._facts``)."""
    steps = int(training.steps)
    noise = claim = None
    if training.noising_matrix is not None:
        given, dtype = materialise(training.noising_matrix, steps, "noising_matrix")
        noise = cleaned(inverse(given), dtype)
    if training.strategy is not None:
        lower, dtype = materialise(training.strategy, steps, "strategy")
        claim = cleaned(lower, dtype)
    noise = claim if noise is None else noise
    claim = noise if claim is None else claim
    scale = float(np.abs(noise).max())
    consistent = bool(np.abs(noise - claim).max() <= 1e-5 * scale)
    jax = jax_modules()
    if training.stddev is not None:
        stddev = float(training.stddev)
    else:
        # jax_privacy's single-participation sensitivity, as BandMFExecutionPlanConfig scales the noise
        import jax.numpy as jnp
        from jax_privacy.matrix_factorization import sensitivity

        with x64(jax):
            column = float(sensitivity.single_participation_sensitivity(jnp.asarray(claim)))
        stddev = float(training.noise_multiplier) * float(training.clip_norm) * column
    k, b = int(training.epochs), training.separation
    terms = LossTerms("linear" if training.linear_sgd else "user",
                      "linear loss, plain SGD" if training.linear_sgd else "user's own",
                      float(training.clip_norm), math.inf, 0.0, convex=bool(training.linear_sgd))
    description = MatrixFactorizationTraining(
        dense_strategy(noise, label="the noising matrix" if training.noising_matrix is not None else "the strategy"),
        k, max(training.n_records * k // steps, 1), stddev / float(training.clip_norm),
        # the gradients' dimension is not the release's: never one, so signs are not enumerated (docs/theory.md 12.2)
        "cyclic" if training.order == "cyclic" else "shuffled", "final", max(training.output_dim, 2), terms,
        ConvexSet("whole", math.inf))
    schema = minsep_sensitivity(claim.T @ claim, k, b)
    if training.order == "cyclic":
        _, exact = release_mu(description)
    else:
        exact = minsep_sensitivity(factor(description.strategy).precision, k, b)
    return Facts(noise, claim, stddev, description, library_sensitivity(claim, b, k), schema, exact, consistent)


def checked(training, value: float) -> str:
    """How a sensitivity compares with dpaudit's for the same schema and with the release's exact value."""
    facts = training._facts
    schema = math.sqrt(max(facts.schema.squared, 0.0))
    exact = math.sqrt(max(facts.exact.squared, 0.0))
    gap = abs(value - schema) / schema
    agreement = (f"agrees with dpaudit's {schema:.6g} for the same schema within 1e-6 relative" if gap <= _AGREE
                 else f"differs from dpaudit's {schema:.6g} for the same schema (relative {gap:.2e})")
    what = "the worst cyclic slot" if training.order == "cyclic" else f"the {training.separation}-min-separation schema"
    kind = "exact" if facts.exact.exact else "an upper bound"
    covers = ("covers" if value >= exact * (1 - _AGREE) else "is BELOW, so the claim understates epsilon for")
    return (f"{agreement} (b={training.separation}, k={training.epochs}, {facts.schema.how}); it {covers} dpaudit's "
            f"value of this release, {exact:.6g} ({what}, {kind})")


def accounted(training, name: str, sensitivity: float, how: str) -> list:
    """jax_privacy's accountant at ``sensitivity`` (its own, or the one a user's code used), for each relation."""
    facts = training._facts
    guarantees = []
    for relation, move in RELATION_FACTORS:
        multiplier = facts.stddev / (float(training.clip_norm) * move * sensitivity)
        profile = AccountantProfile(multiplier, int(training.steps), training.n_records,
                                    facts.description.batch_size)
        doubled = "" if move == 1.0 else ", doubled for replace-one as clipped_grad(...).sensitivity does"
        citation = (f"jax_privacy {library_version('jax_privacy')}: sensitivity {sensitivity:.6g} from {how}"
                    f"{doubled}; noise multiplier stddev / (clip_norm * sensitivity) = {multiplier:.6g} into "
                    f"SingleReleaseTrainingAccountant (PLD, one GaussianDpEvent); the sensitivity "
                    f"{checked(training, sensitivity)}")
        guarantees.append(ProfileGuarantee(name, citation, relation, profile.epsilon, profile.delta,
                                           key=("jax_privacy", name, relation, multiplier, int(training.steps))))
    return guarantees


def dpaudit_guarantees(training) -> list:
    """dpaudit's values (``accounting.builders.matrix``) for the noise as run, as guarantees of this list."""
    facts = training._facts
    out = []
    for claim in matrix_claims(facts.description, None):
        if claim.name not in DPAUDIT_VALUES:  # a library's figure for dp-mf's own description: ours is above
            continue
        if claim.name == "mf-minsep" and training.order != "cyclic":
            continue  # given below at the separation the user's batches keep (the builder's is b = 1)
        if claim.name == "mf-releases" and training.order != "cyclic":
            out.append(InapplicableGuarantee(claim.name, claim.citation, claim.relation,
                                             "order='min-sep': a record's steps are the sampler's, not one "
                                             "cyclic pattern (mf-minsep covers every b-separated pattern)"))
        elif claim.applicable:
            out.append(ProfileGuarantee(claim.name, claim.citation, claim.relation, claim.epsilon, claim.delta,
                                        key=("dpaudit", facts.description, claim.name, claim.relation)))
        else:
            out.append(InapplicableGuarantee(claim.name, claim.citation, claim.relation, claim.reason))
    if training.order != "cyclic":
        # the b-min-separation value at the user's b, in the builder's words
        from dpaudit.mechanisms.accounting.builders.matrix import MINSEP
        from dpaudit.mechanisms.accounting.claims import profile_claim
        from dpaudit.mechanisms.accounting.profiles import gaussian_log_delta

        mu = math.sqrt(facts.exact.squared) * float(training.clip_norm) / facts.stddev
        for relation, move in RELATION_FACTORS:
            claim = profile_claim("mf-minsep", f"{MINSEP}; b = {training.separation}, k = {training.epochs}: "
                                  f"{facts.exact.how}", relation,
                                  lambda e, mu=move * mu: gaussian_log_delta(e, mu))
            out.append(ProfileGuarantee(claim.name, claim.citation, relation, claim.epsilon, claim.delta,
                                        key=("dpaudit", facts.description, "mf-minsep", relation,
                                             training.separation)))
    return out


def assumptions(training) -> list[dict[str, Any]]:
    """jax_privacy's accounting assumptions, each checked against the training as described.

    Returns
    -------
    list of dict
        ``name``, ``assumed``, ``holds`` and ``detail``.
    """
    facts = training._facts
    exact = math.sqrt(max(facts.exact.squared, 0.0))
    library = facts.library[0]
    covered = training.order != "cyclic" or training.period >= training.separation
    checks = [
        {"name": "participation", "assumed": f"every record in at most k={training.epochs} steps, any two at least "
                                             f"min_sep={training.separation} apart",
         "holds": covered,
         "detail": (f"order={training.order!r}" + (f": a record is used every {training.period} steps" if training.order ==
                                               "cyclic" else ": as the user's sampler keeps it")
                    + ("" if covered else f", closer than min_sep={training.separation}"))},
        {"name": "strategy", "assumed": "the claim's C is the inverse of the matrix the privatizer was given",
         "holds": facts.consistent,
         "detail": "one of noising_matrix and strategy given, or both agree" if facts.consistent else
         "strategy is not the inverse of noising_matrix: the noise is not the one the claim is for"},
        {"name": "library-sensitivity", "assumed": "jax_privacy's sensitivity bounds this release's",
         "holds": library >= exact * (1 - _AGREE),
         "detail": f"{facts.library[1]} = {library:.6g}; dpaudit's exact value {exact:.6g}"},
        {"name": "relation", "assumed": "neighbours replace one record's gradient by zero (zero-out)",
         "holds": True, "detail": "the canary pair puts a zero record in the canary's place: zero-out when a "
                                  "zero record's gradient is zero in your loss (a dataset_pair of equal sizes "
                                  "is audited as replace-one)"},
    ]
    if training.sensitivity is not None:
        value = float(training.sensitivity)
        checks.insert(3, {"name": "given-sensitivity", "assumed": "the sensitivity the noise was set with bounds "
                                                                  "this release's",
                          "holds": value >= exact * (1 - _AGREE),
                          "detail": f"sensitivity={value:.6g}; dpaudit's exact value {exact:.6g}"})
    return checks
