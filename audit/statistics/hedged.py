"""Hedged placement: a few tests placed on calibration in different ways, certified together (docs/theory.md 7).

At small epsilon the test that calibration places best is a noisy choice:
the best test of a pure-DP algorithm often sits in a tail of a few hundred
calibration trials, where the penalty that guards against the luckiest of
thousands of candidates (``audit.statistics.thresholds.PLANNING_LEVELS``)
pushes the placement towards wider regions of smaller ratio, while a score
whose extreme values are fitted to their own labels can still win there by
luck. Which of these errors a given calibration draw makes is not known in
advance, and the certification trials, nine times as many, can tell.

A hedged plan (:class:`PlanFamily`) holds up to :data:`HEDGE_MEMBERS`
tests, all fixed on calibration scores only:

- the test placed by the calibration counts as for any score
  (``plan_epsilon``);
- the best test whose smaller side (region or complement) holds fewer than
  :data:`THIN_SPAN` times the planning floor of pooled calibration trials
  (``audit.statistics.thresholds.thin_tests``): the thin tail, placed by the
  same rule;
- the best test whose smaller side holds at least that many: the wide
  member, placed by the same rule (the counts' test is one of these two, so
  whichever of them the counts chose, the other is certified beside it);
- the test placed by the exponential tilt of the scores
  (``audit.statistics.tilt``), where its gate keeps it.

Equal tests are certified once, and a test whose smaller side is a fraction
of the one atom at the end of the scores is left out while another is left
(:func:`splits_end_atom`: the whole atom has the same likelihood ratio on
more trials; on a few-valued output the thin tail is often such a
fraction). Each of the ``k`` distinct tests is certified
at failure probability ``beta / k`` and the largest bound is reported: by the
union bound, the probability that any of them overstates is at most ``beta``,
so the reported bound holds at ``1 - beta`` whichever member gives it. Every
member is a function of calibration scores only, so choosing them costs
nothing beyond the split of ``beta``.

References
----------
docs/theory.md 7 (placement at the planned budget, hedged placement); Bonferroni's union bound.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dpaudit.auditing.statistics.confidence import Counts, ThresholdPlan
from dpaudit.auditing.statistics.records import EpsilonBound

__all__ = ["HEDGE_MEMBERS", "THIN_SPAN", "PlanFamily", "family_of", "finish_family", "splits_end_atom"]

#: The most tests a hedged plan certifies together: the thin tail's, the wide member's (one of the two is the
#: counts' placement) and the tilt's
HEDGE_MEMBERS = 3
#: The thin-tail member's smaller side holds fewer than this many times the planning floor of pooled
#: calibration trials (``audit.statistics.thresholds.planning_floor``: 100 at 10^5 calibration trials per side)
THIN_SPAN = 10


@dataclasses.dataclass(frozen=True)
class PlanFamily:
    """Tests certified together under a union bound; each member is a one-test :class:`ThresholdPlan`.

    The first member is the primary placement: the family reads its orientation (for the figures) and
    calibration sizes. :meth:`count` returns the members' counts one after the other, so that they add
    up over certification chunks like a plan's (``audit.jobs.streaming``).
    """

    members: tuple[ThresholdPlan, ...]

    @property
    def sign(self) -> float:
        return self.members[0].sign

    @property
    def orientation(self) -> str:
        return self.members[0].orientation

    @property
    def calibration(self) -> dict[str, int]:
        return self.members[0].calibration

    def count(self, side: str, scores: np.ndarray, chunk: int = 0) -> np.ndarray:
        """Each member's false positives (side ``"a"``) or false negatives (``"b"``), concatenated."""
        return np.concatenate([np.atleast_1d(member.count(side, scores, chunk)) for member in self.members])

    def parts(self, counts: Counts) -> list[Counts]:
        """``counts`` of the whole family cut into each member's."""
        sizes = np.cumsum([0] + [np.size(member.thresholds) for member in self.members])
        fp, fn = np.atleast_1d(counts.false_positives), np.atleast_1d(counts.false_negatives)
        return [Counts(fp[start:stop], fn[start:stop], counts.trials_a, counts.trials_b)
                for start, stop in zip(sizes[:-1], sizes[1:])]


def _key(plan: ThresholdPlan) -> tuple:
    return (plan.sign, plan.method, plan.direction, tuple(np.atleast_1d(plan.thresholds).tolist()),
            tuple(plan.fractions.tolist()))


def splits_end_atom(plan: ThresholdPlan, cal_a: np.ndarray, cal_b: np.ndarray) -> bool:
    """Whether ``plan``'s test has a smaller side (region or complement, in pooled calibration trials) that is a
    fraction of one atom: the oriented scores' largest value (its region ``s > t`` empty) or smallest (its
    complement ``s < t`` empty), taken in part by the tie-break.

    Such a test has the atom's likelihood ratio on fewer trials than the whole atom, which certifies more in
    expectation; at small epsilon on a few-valued output the thin-tail member is that (a thirty-second of an
    SVT's most telling answer vector) and only costs the others their share of ``beta`` (docs/theory.md 7).
    Calibration scores only: dropping it costs nothing in the failure probability.
    """
    fraction = float(plan.fractions[0])
    if fraction >= 1.0:
        return False
    oriented = plan.sign * np.concatenate([np.asarray(cal_a, dtype=float), np.asarray(cal_b, dtype=float)])
    threshold = float(plan.thresholds[0])
    above, below = int(np.count_nonzero(oriented > threshold)), int(np.count_nonzero(oriented < threshold))
    inside = above + fraction * (oriented.size - above - below)
    return above == 0 if inside <= oriented.size - inside else below == 0


def family_of(plans: Sequence[ThresholdPlan | None]) -> ThresholdPlan | PlanFamily:
    """The distinct plans among ``plans`` (None entries dropped): the plan itself when only one is left."""
    members: dict[tuple, ThresholdPlan] = {}
    for plan in plans:
        if plan is not None:
            members.setdefault(_key(plan), plan)
    distinct = tuple(members.values())
    return distinct[0] if len(distinct) == 1 else PlanFamily(distinct)


def finish_family(plan: PlanFamily, counts: Counts, beta: float,
                  finish: Callable[[ThresholdPlan, Counts, float], EpsilonBound]) -> EpsilonBound:
    """The largest of the members' bounds, each certified by ``finish(member, counts, confidence)`` at
    ``1 - beta / k``: the union bound makes the reported bound hold at ``1 - beta`` (module docstring)."""
    k = len(plan.members)
    bounds = [finish(member, part, 1 - beta / k) for member, part in zip(plan.members, plan.parts(counts))]
    best = max(range(k), key=lambda i: bounds[i].epsilon_lower_bound)
    members: list[dict[str, Any]] = [
        {"placement": b.placement, "epsilon_lower_bound": b.epsilon_lower_bound, "threshold": b.threshold,
         "tie_fraction": b.tie_fraction, "orientation": b.orientation, "direction": b.direction,
         "method": b.method} for b in bounds]
    split = {"beta": beta, "tests": k, "per_test": beta / k, "reported": best,
             "within_test": bounds[best].failure_split}
    return dataclasses.replace(bounds[best], confidence=1 - beta, failure_split=split, hedge=members)
