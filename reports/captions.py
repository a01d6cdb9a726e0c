"""The figures' captions and legends: each says what the figure draws for this audit, and only that.

Every caption is built from the fields the figure is drawn from (the certifying test's threshold and rates,
the histogram's bars, the claims the figure marks, the pair's relation), so what it says of the figure is
true of the figure (``tests/reports/test_true_sentences.py`` checks them).
"""

from __future__ import annotations

import math
from typing import Any

from dpaudit.auditing.jobs.result import AuditResult
from dpaudit.reports.formatting import Result, _number, _plain_num, typed
from dpaudit.reports.tables import strongest_row, tightest_claim

__all__ = ["THIN", "certifying_test", "ceiling_caption", "histogram_caption", "neighbour_label", "profile_caption",
           "exact_value", "roc_caption"]


def certifying_test(result: Result) -> dict[str, Any] | None:
    """Where the certifying test of the strongest position sits: its threshold in score units, the side of it that
    certifies, and its certified rates; ``None`` when the epsilon record does not say (a hedged family).

    Keys: ``threshold`` (raw score), ``above`` (True when the test calls S' at or above the threshold, False
    when at or below), ``far`` (True when the bound comes from the corner where the test fires on almost
    every trial: it counts how rarely S' scores fall on the other side, ``log((1-delta-FPR)/FNR)``), and
    ``fpr``, ``fnr``: the upper confidence bounds of the false-positive (S called S') and false-negative
    (S' called S) rates."""
    record = strongest_row(result).empirical.epsilon
    keys = ("threshold", "orientation", "direction", "false_positive_rate_upper", "false_negative_rate_upper")
    if not all(key in record for key in keys) or not all(_number(record[key]) for key in keys[:1] + keys[3:]):
        return None
    sign = 1.0 if record["orientation"] == "larger under S'" else -1.0
    return {"threshold": sign * record["threshold"], "above": sign > 0,
            "far": str(record["direction"]).startswith("log((1-delta-FPR)"),
            "fpr": float(record["false_positive_rate_upper"]), "fnr": float(record["false_negative_rate_upper"])}


def roc_caption(result: Result) -> str:
    """The ROC figure's caption: where this audit's test sits on it (its threshold and certified rates)."""
    place = certifying_test(result)
    if place is None:
        return ("The further above the dotted chance line, the stronger the test; the bound is certified where the "
                "two error rates are most unequal.")
    side = "at or above" if place["above"] else "at or below"
    fires = (f"This audit's test calls S' when the score is {side} {_plain_num(place['threshold'], '.4g')}: it "
             f"fires on at least {_plain_num(1 - place['fnr'], '.3g')} of the trials of S' and at most "
             f"{_plain_num(place['fpr'], '.3g')} of those of S (certified rates, marked).")
    if place["far"]:
        return (f"{fires} It certifies in the direction log((1 - delta - FPR) / FNR), from its rarer error: how "
                f"seldom S' lands on the other side (at most {_plain_num(place['fnr'], '.3g')}) against how often "
                f"S does (at least {_plain_num(1 - place['fpr'], '.3g')}). The curve is "
                "drawn from that side, the rate S' is called S against the rate S is: the further it rises above "
                "the dotted chance line at the left, the larger the epsilon.")
    return (f"{fires} It certifies in the direction log((1 - delta - FNR) / FPR), from its false-positive rate: "
            "the further the curve lies above the dotted chance line at that rate, the larger the epsilon.")


#: a share of trials below this is too small to see as a bar beside the other dataset's
THIN = 0.05


def neighbour_label(result: Result) -> str:
    """What S' is for this audit's pair, from the pair the canary table records (``opposite``, ``zero``,
    ``remove``) or, for a pair given by the caller or an adapter, from its relation."""
    canary = typed(result).canary
    pair, relation = canary.get("pair"), str(canary.get("relation"))
    if canary.get("kind") == "dataset-pair":
        change = {"add-remove": "one record added or removed", "replace-one": "one record replaced",
                  "zero-out": "one record zeroed"}.get(relation)
        return "S': the pair's other dataset" + (f", {change}" if change else "")
    if pair == "remove" or (pair is None and relation == "add-remove"):
        return "S': without the canary record"
    if pair == "zero" or (pair is None and relation == "zero-out"):
        return "S': canary replaced by a zero record"
    if pair == "opposite":
        return "S': canary replaced by its opposite"
    return "S': canary record replaced"


def histogram_caption(result: Result) -> str:
    """The score histograms' caption: the threshold of this audit's test and which side of it certifies."""
    place = certifying_test(result)
    if place is None:
        return ("Look at the tails: scores where few trials of S land but many of S' do (or the reverse) are what "
                "certify epsilon.")
    upper_tail = place["above"] != place["far"]  # the certifying region: where the test fires, or (far) does not
    tail = "above" if upper_tail else "below"
    if place["far"]:
        many, few, rare = "S", "S'", place["fnr"]
        counts = (f"at least {_plain_num(1 - place['fpr'], '.3g')} of the trials of S land there and at most "
                  f"{_plain_num(place['fnr'], '.3g')} of those of S'")
    else:
        many, few, rare = "S'", "S", place["fpr"]
        counts = (f"at least {_plain_num(1 - place['fnr'], '.3g')} of the trials of S' land there and at most "
                  f"{_plain_num(place['fpr'], '.3g')} of those of S")
    heights = _tail_heights(result, place["threshold"], upper_tail)
    few_height, many_height = (heights[1], heights[0]) if place["far"] else heights
    thin = (f" So few of the trials of {few} land there that their bars are hard to see beside those of {many}: "
            "the bound rests on how few they are." if rare < THIN and few_height < THIN * many_height else "")
    return (f"The dashed line is this audit's threshold ({_plain_num(place['threshold'], '.4g')}); it certifies "
            f"from the scores {tail} it: {counts} (certified rates).{thin}")


def _tail_heights(result: AuditResult, threshold: float, upper: bool) -> tuple[float, float]:
    """The tallest bar of S and of S' drawn on the certifying side of ``threshold`` (bins whose centre lies
    there), from the histogram the report draws: what a reader sees of that tail."""
    data = strongest_row(result).distributions.get("histogram") or {}
    edges, counts_a, counts_b = data.get("edges") or [], data.get("a") or [], data.get("b") or []
    centres = [(low + high) / 2 for low, high in zip(edges[:-1], edges[1:])]
    side = [(centre >= threshold) if upper else (centre <= threshold) for centre in centres]
    tallest_a = max((count for count, kept in zip(counts_a, side) if kept), default=0.0)
    tallest_b = max((count for count, kept in zip(counts_b, side) if kept), default=0.0)
    return float(tallest_a), float(tallest_b)


def profile_caption(result: Any) -> str:
    """The privacy profile's caption: what the curves are, and the certified point when the figure marks it."""
    result = typed(result)
    certified, delta = strongest_row(result).empirical.epsilon_lower_bound, result.empirical.delta
    star = (f"The star is the headline, epsilon >= {_plain_num(certified, '.3f')} certified at the audit's delta "
            f"{_plain_num(delta, 'g')}. " if delta and delta > 0 and math.isfinite(certified) and certified > 0
            else "")
    return (f"{star}Look for the black curve rising above a claimed curve: that would contradict the claim at that "
            "epsilon; the distance below is what the audit could not show.")



def ceiling_caption(result: Result) -> str:
    """The one-position figure's caption, naming only what it draws: the certified bound (dot), the ceiling
    band and ceiling where computed, the tightest claim where one applies, the exact value where known."""
    result = typed(result)
    row = strongest_row(result)
    drawn = []
    if row.ceiling_band is not None:
        drawn.append("the band 95% of ideal threshold audits reach at these trials (grey)")
    claim = tightest_claim(row, result.canary.get("relation"))
    if claim is not None:
        drawn.append(f"the tightest claim, {claim.name} (dotted)")
    if exact_value(row) is not None:
        drawn.append("the exact value of this pair (red)")
    if not drawn:
        return "The certified bound (dot): no claim, ceiling or exact value is known for this audit to draw beside it."
    listed = drawn[0] if len(drawn) == 1 else ", ".join(drawn[:-1]) + " and " + drawn[-1]
    return f"Where the certified bound (dot) falls against {listed}."


def exact_value(row: Any) -> float | None:
    """The applicable exact value of a position's pair (the figures draw it), or None."""
    exact = next((c.epsilon for c in row.claims if c.kind == "exact-instance" and c.applicable), None)
    return exact if exact is not None and math.isfinite(exact) else None
