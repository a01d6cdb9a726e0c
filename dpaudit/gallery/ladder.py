"""The ladder: one DP-SGD instance under four threat models, with every claim (docs/theory.md 6).

Rungs (configs in ``ladder/``): every iterate released with shuffled batches
(the worst-case background of Chua et al.), every iterate with Poisson
batches, the last iterate only, and the hidden state of a projected noisy
SGD (PNSGD) with the same noise per step. The table puts each audit's
certified bound and ceiling (with its band) next to its claims, applicable or not (with the
reason), so the price of each threat model and each sampling is visible.
"""

from __future__ import annotations

from html import escape

__all__ = ["ladder_table"]


def _number(value) -> str:
    return "&ndash;" if value is None else f"{value:.3f}"


def _ceiling(row) -> str:
    """The ceiling with its band (where 95% of ideal threshold audits land), flagged when the certified
    bound lies above the band."""
    text = _number(row.ceiling)
    if row.ceiling_band is not None:
        text += f" ({_number(row.ceiling_band[0])} to {_number(row.ceiling_band[1])})"
    if row.ceiling_source:
        text += " (simulated)"
    if row.above_ceiling_band:
        text += " <b>notable: certified above the band</b>"
    return text


def ladder_table(results) -> str:
    """An HTML table: one row per audit, its certified bound, its ceiling and every claim."""
    rows = []
    for result in results:
        row = result.per_index[0] if len(result.per_index) == 1 else max(
            result.per_index, key=lambda r: r.empirical.epsilon_lower_bound)
        claims = []
        for claim in row.claims:
            if claim.applicable or claim.epsilon is not None:  # a reference keeps its value, never applicable
                kind = {"lower-bound": " (lower bound, a reference)", "exact-instance": " (exact value)",
                        "reference": " (a reference, not a bound)"}.get(claim.kind, "")
                claims.append(f"<li><b>{escape(claim.name)}</b> {_number(claim.epsilon)}{escape(kind)}</li>")
            else:
                claims.append(f"<li><b>{escape(claim.name)}</b> not applicable: {escape(claim.reason)}</li>")
        rows.append(f"<tr><td>{escape(result.title)}</td><td>{escape(str(result.canary.get('relation')))}</td>"
                    f"<td>{_number(row.empirical.epsilon_lower_bound)}</td><td>{_ceiling(row)}</td>"
                    f"<td><ul>{''.join(claims)}</ul></td></tr>")
    return ("<table class='ladder'><thead><tr><th>threat model</th><th>relation</th><th>certified epsilon</th>"
            "<th>ceiling (95% band)</th><th>claims at this delta</th></tr></thead><tbody>" + "".join(rows)
            + "</tbody></table>")
