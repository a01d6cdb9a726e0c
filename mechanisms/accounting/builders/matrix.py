"""Claims of DP matrix-factorisation training (correlated noise), from its description (docs/theory.md 12).

Without amplification, every noisy gradient of a DP-MF training is one
Gaussian mechanism whose ``mu`` is the strategy's sensitivity over the
participation schema over the noise multiplier (``accounting.participation``):
its privacy profile is exact (Balle and Wang 2018, Thm 8), for both relations
(zero-out: a participation moves the clipped sum by at most ``L``;
replace-one: ``2 L``). The last iterate of a linear-loss training on the whole
space is one Gaussian coordinate per model coordinate, whatever the batch
order: its ``mu`` is ``k / (sigma |C^{-T} 1|)``. Beside them: the bound over
every b-min-separated pattern that libraries assume, dp_accounting's
tree-aggregation RDP for the tree, and a library's own figures
(``accounting.builders.matrix_library``).
"""

from __future__ import annotations

import math

import numpy as np

from dpaudit.mechanisms.accounting.builders.builder import ClaimBuilder
from dpaudit.mechanisms.accounting.claims import Claim, not_applicable, profile_claim, rdp_claim
from dpaudit.mechanisms.accounting.descriptions import MatrixFactorizationTraining
from dpaudit.mechanisms.accounting.participation import PatternValue, cyclic_sensitivity, minsep_sensitivity
from dpaudit.mechanisms.accounting.profiles import gaussian_log_delta
from dpaudit.mechanisms.accounting.rdp import DEFAULT_ORDERS
from dpaudit.mechanisms.accounting.strategies import factor

__all__ = ["RELATION_FACTORS", "matrix_claims", "release_mu", "last_iterate_mu"]

#: The clipped sum's largest move per participation, in units of the clip ``L``, for each relation.
RELATION_FACTORS = (("zero-out", 1.0), ("replace-one", 2.0))
EXACT = ("every noisy gradient is one Gaussian mechanism, mu = sensitivity over the participation schema / "
         "noise multiplier (Choquette-Choo et al. 2023, ICML, Thm 2; Balle & Wang 2018, Thm 8; docs/theory.md 12.2)")
LAST = ("last iterate of linear-loss training on the whole space: one Gaussian, mu = k / (sigma |C^{-T} 1|) "
        "(docs/theory.md 12.3)")
MINSEP = ("b-min-separation sensitivity, every pattern of at most k participations b steps apart "
          "(Choquette-Choo et al. 2023, NeurIPS, Thm 2; docs/theory.md 12.2)")
TREE = ("dp_accounting's SingleEpochTreeAggregationDpEvent (RDP, Kairouz et al. 2021, App. D), composed over the "
        "k trees a record is in; converted by CKS Prop. 12")


def release_mu(description: MatrixFactorizationTraining, slot: int | None = None) -> tuple[float, PatternValue]:
    """``mu`` of every noisy gradient under zero-out (unit per-participation move over the noise multiplier)
    for cyclic order: at the worst slot, or at ``slot`` (0-based)."""
    value = cyclic_sensitivity(factor(description.strategy).precision, description.steps, description.epochs,
                               dim=description.dim, slot=slot)
    return math.sqrt(max(value.squared, 0.0)) / description.noise_multiplier, value


def last_iterate_mu(description: MatrixFactorizationTraining) -> float:
    """``mu`` of the last iterate of a linear-loss training under zero-out: ``k / (sigma sqrt(1^T K 1))``."""
    return description.epochs / (description.noise_multiplier * math.sqrt(factor(description.strategy).last_variance))


def _gaussian(name: str, citation: str, relation: str, mu: float, index: int | None = None) -> Claim:
    return profile_claim(name, citation, relation, lambda e, mu=mu: gaussian_log_delta(e, mu), index=index)


def _slot(description: MatrixFactorizationTraining, index: int | None) -> int | None:
    """The cyclic slot of the record at 1-based ``index`` (``None``: the worst slot)."""
    return None if index is None else (index - 1) // description.batch_size % description.epoch_steps


def matrix_claims(description: MatrixFactorizationTraining, index: int | None) -> list[Claim]:
    """Every claim of a DP-MF training, at the record ``index`` (``None``: the worst record)."""
    claims: list[Claim] = []
    cyclic = description.selection == "cyclic"
    final = description.release == "final"
    linear = description.loss.name == "linear" and description.region.kind == "whole"
    for relation, move in RELATION_FACTORS:
        if cyclic:
            mu, value = release_mu(description, _slot(description, index))
            kind = "exact" if value.exact else "an upper bound"
            where = "the record's" if index is not None else "the worst"
            citation = (f"{EXACT}; {where} pattern, steps {_steps(value.pattern)}: sensitivity {kind} "
                        f"({value.how})" + ("; the final model is post-processing of it" if final else ""))
            claims.append(_gaussian("mf-releases", citation, relation, move * mu, index))
        else:
            claims.append(not_applicable("mf-releases", EXACT, relation,
                                         "batches are reshuffled every epoch: a record's steps are random, not the "
                                         "cyclic pattern this value is for (the b-min-separation bound with b = 1 "
                                         "covers every order)", index))
        separation = description.epoch_steps if cyclic else 1
        bound = minsep_sensitivity(factor(description.strategy).precision, description.epochs, separation)
        claims.append(_gaussian("mf-minsep", f"{MINSEP}; b = {separation}, k = {description.epochs}, worst pattern "
                                f"{_steps(bound.pattern)}: {bound.how}", relation,
                                move * math.sqrt(bound.squared) / description.noise_multiplier, index))
        if not final:
            claims.append(not_applicable("mf-last-iterate", LAST, relation,
                                         "every iterate is released: this value is for the last iterate alone", index))
        elif not linear:
            claims.append(not_applicable("mf-last-iterate", LAST, relation,
                                         f"the {description.loss.label} loss on domain {description.region.kind!r}: "
                                         "the value holds for a linear loss on the whole space only", index))
        else:
            claims.append(_gaussian("mf-last-iterate", LAST, relation, move * last_iterate_mu(description), index))
    claims.append(_tree_claim(description, index))
    # jax_privacy is optional and slow to import: its claim loads it (or says it is absent) on first use
    from dpaudit.mechanisms.accounting.jax_privacy_claims import amplified_claim, jax_privacy_claim

    worst = release_mu(description)[1] if cyclic else None
    exact = math.sqrt(worst.squared) if worst is not None else math.nan
    claims += [jax_privacy_claim(description, exact, index, attained=worst is not None and worst.exact),
               amplified_claim(index)]
    return [claim for claim in claims if claim is not None]


def _tree_claim(description: MatrixFactorizationTraining, index: int | None) -> Claim | None:
    """dp_accounting's tree-aggregation RDP (zero-out, its REPLACE_SPECIAL relation), for the tree only."""
    if description.strategy.kind != "tree":
        return None
    if description.selection != "cyclic":
        return not_applicable("tree-rdp", TREE, "zero-out", "the tree's accounting assumes one participation per "
                              "tree; reshuffled batches keep that, yet are not what this claim was checked for", index)
    # dp-accounting takes about a second to import: it loads with the first tree claim
    from dp_accounting import NeighboringRelation, dp_event
    from dp_accounting.rdp import rdp_privacy_accountant

    accountant = rdp_privacy_accountant.RdpAccountant(orders=list(DEFAULT_ORDERS),
                                                      neighboring_relation=NeighboringRelation.REPLACE_SPECIAL)
    tree = dp_event.SingleEpochTreeAggregationDpEvent(float(description.noise_multiplier),
                                                      [description.epoch_steps])
    accountant.compose(tree, int(description.epochs))
    return rdp_claim("tree-rdp", TREE, "zero-out", np.asarray(DEFAULT_ORDERS, dtype=float),
                     np.asarray(accountant.rdp, dtype=float), index=index)


def _steps(pattern: tuple[int, ...]) -> str:
    shown = ", ".join(str(t + 1) for t in pattern[:8])
    return f"{{{shown}{', ...' if len(pattern) > 8 else ''}}}"


BUILDERS = (ClaimBuilder("matrix-factorisation", (MatrixFactorizationTraining,), matrix_claims, per_index=True),)
