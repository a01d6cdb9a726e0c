"""The statistical ceiling and its band in words: what they are, and what a certified bound's place against
the band means (docs/theory.md 3.4)."""

from __future__ import annotations

from collections.abc import Sequence

from dpaudit.auditing.jobs.result import AuditResult, IndexResult
from dpaudit.reports.formatting import Result, _number, _plain_num, band_text, typed

__all__ = ["BAND_WORDS", "CEILING_WORDS", "LOPSIDED", "band_sentences", "notable_sentences"]

#: What the statistical ceiling is, in the words every report, the gallery and ``dpaudit plan`` use.
CEILING_WORDS = ("what an ideal threshold audit (the best threshold for the score laws, known in advance) "
                 "certifies from the expected counts at this many trials and this confidence. It is a central "
                 "figure, not a maximum: such an audit lands above it about half the time. A certified bound "
                 "near it means more trials, not a better attack, would raise it.")


#: What the band beside a ceiling is (docs/theory.md 3.4).
BAND_WORDS = ("the 2.5% and 97.5% quantiles of what that ideal audit certifies when its counts vary by chance "
              "(binomial counts at the best threshold, 4000 seeded draws): 95% of ideal audits land inside it. "
              "A certified bound inside the band is as good as the ideal test at these trials; below the band's "
              "bottom, this audit's test was weaker than the ideal one; above its top is notable. The band need "
              "not be centred on the ceiling: where the test's rarer error is expected about once or less, luck "
              "can lift an ideal audit's bound little but bad luck can drop it far.")


def notable_sentences(result: Result) -> list[str]:
    """One sentence per canary position whose certified bound lies above its ceiling band's top."""
    sentences = []
    for row in typed(result).per_index:
        if not row.above_ceiling_band:
            continue
        where = f"at canary index {row.index}, " if row.index is not None else ""
        simulated = " (a simulated law carries its own sampling error)" if row.ceiling_source else ""
        sentences.append(
            f"Notable: {where}the certified bound "
            f"{_plain_num(row.empirical.epsilon_lower_bound, '.3f')} lies above the ceiling band "
            f"({band_text(row.ceiling_band)}): an ideal threshold audit at these trials lands there 2.5% of "
            f"the time. Check that the score law behind the ceiling describes this mechanism{simulated} "
            "before putting it down to chance.")
    return sentences


#: A band is called lopsided when one side of it, measured from the ceiling, is this many times the other.
LOPSIDED = 3.0


def _positions(rows: Sequence[IndexResult]) -> str:
    indices = [str(row.index) for row in rows if row.index is not None]
    if not indices:
        return ""
    return f"at canary {'index' if len(indices) == 1 else 'indices'} {', '.join(indices)}, "


def _ties_with_the_likelihood_ratio(result: AuditResult, row: IndexResult) -> bool:
    """True when the score that certified at ``row`` is the exact likelihood ratio, or gave the same test as
    it on the held-out calibration trials (a tie of the portfolio, :func:`portfolio_rows`)."""
    if result.attack.get("score") == "exact":
        return True
    here = [c for c in result.attack.get("portfolio") or () if c.get("index") == row.index and c.get("applicable")]
    chosen = next((c for c in here if c.get("chosen")), None)
    return chosen is not None and any(c.get("name") == "exact" and (c.get("epsilon"), c.get("mu")) ==
                                      (chosen.get("epsilon"), chosen.get("mu")) for c in here)


def band_sentences(result: Result) -> list[str]:
    """What the certified bound's place against the ceiling band means, for every position with a band: below
    it (one sentence a position), inside it (one sentence for all), and why a lopsided band is lopsided (above
    the band is :func:`notable_sentences`'s)."""
    result = typed(result)
    rows = [row for row in result.per_index if row.ceiling_band is not None]
    sentences = []
    for row in rows:
        if row.below_ceiling_band:
            calibration = (row.empirical.epsilon.get("trials") or {}).get("calibration_a")
            chosen = (f"chosen on {_plain_num(calibration, ',')} calibration trials per dataset"
                      if _number(calibration) else "chosen on calibration trials")
            if _ties_with_the_likelihood_ratio(result, row):
                why = (f"Its score gave the same test as the exact likelihood ratio on the held-out calibration "
                       f"trials, so the gap lies in the threshold and the way its counts are certified, {chosen}, "
                       "where the ideal audit knows the best ones in advance: more calibration trials "
                       "(calibration_fraction) can choose them better.")
            else:
                why = (f"Its score may not be the likelihood ratio, and its threshold was {chosen}, where the ideal "
                       "audit knows the best one in advance: a stronger score, or more calibration trials "
                       "(calibration_fraction), closes the gap.")
            sentences.append(
                f"Below the band: {_positions([row])}the certified bound "
                f"{_plain_num(row.empirical.epsilon_lower_bound, '.3f')} lies below the ceiling band "
                f"({band_text(row.ceiling_band)}); only 2.5% of ideal threshold audits at these trials certify "
                f"less, so chance in the counts hardly explains the gap: this audit's test is weaker than the ideal "
                f"one. {why} More trials raise the ceiling and the bound together.")
    inside = [row for row in rows if not row.below_ceiling_band and not row.above_ceiling_band]
    if inside:
        where = _positions(inside)
        sentences.append(
            f"Inside the band: {where}the certified {'bound lies' if len(inside) == 1 else 'bounds lie'} "
            "within what 95% of ideal threshold audits certify at these trials: the attack did what an ideal "
            "test could, and more trials, not a better attack, would raise the bound.")
    for row in rows:
        low, high = row.ceiling_band
        ceiling = row.ceiling
        if not (_number(ceiling) and _number(low) and _number(high) and low <= ceiling <= high):
            continue
        under, over = ceiling - low, high - ceiling
        if under > LOPSIDED * max(over, 0.0) and under > 0:
            sentences.append(
                f"Lopsided band: {_positions([row])}the band reaches {_plain_num(over, '.3g')} above the central "
                f"ceiling {_plain_num(ceiling, '.3f')} and {_plain_num(under, '.3g')} below it. The ideal test's "
                "rarer error is expected about once or less at these trials: its count cannot fall below zero, "
                "so luck lifts the bound little, while one or two rare errors more than expected drop it far.")
        elif over > LOPSIDED * max(under, 0.0) and over > 0:
            sentences.append(
                f"Lopsided band: {_positions([row])}the band reaches {_plain_num(over, '.3g')} above the central "
                f"ceiling {_plain_num(ceiling, '.3f')} and {_plain_num(under, '.3g')} below it. The bound goes "
                "as the logarithm of the rarer error's count, which is steep when that count is small: a few "
                "rare errors fewer than expected lift the bound more than as many more drop it.")
    return sentences
