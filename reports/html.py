"""One self-contained HTML report: Jinja2 with autoescaping, figures inlined as SVG."""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from dpaudit.reports import plots
from dpaudit.reports.text import (
    INDEX_COLUMNS,
    _plain_num,
    ESTIMATE_COLUMNS,
    PORTFOLIO_COLUMNS,
    claims_rows,
    estimate_rows,
    gdp_sentence,
    index_rows,
    portfolio_rows,
    reading_guide,
    release_text,
    shown_params,
    typed,
    verdict_sentence,
)

__all__ = ["html"]

_ENV = Environment(loader=PackageLoader("dpaudit.reports", "templates"), autoescape=select_autoescape(["html", "j2"]))
_ENV.filters["num"] = _plain_num


def html(result: Any) -> str:
    """Render the report of an :class:`AuditResult` (or its document); every user-supplied string goes
    through autoescaping."""
    result = typed(result)
    if result.one_run:  # one run certifies one epsilon from canary scores: no profile, no positions
        figures = [("ROC of the canary score: included against excluded canaries (log axes; not certified).",
                    plots.roc(result)),
                   ("Canary scores: S are the included canaries, S' the excluded ones.", plots.histograms(result))]
    else:
        figures = [
            ("Certified epsilon (each index at its own confidence) against every applicable claim.",
             plots.epsilon_by_index(result)),
            ("Certified privacy profile under the claimed profiles.", plots.privacy_profile(result)),
            ("ROC of the distinguisher at the strongest index (log axes).", plots.roc(result)),
            ("Score histograms on S and S' at the strongest index.", plots.histograms(result)),
        ]
    return _ENV.get_template("report.html.j2").render(
        doc=result, sentence=verdict_sentence(result), gdp=gdp_sentence(result), figures=figures,
        release=release_text(result.mechanism.get("release_grid")),
        claims=claims_rows(result.claims, result.tightness, result.empirical.epsilon_lower_bound),
        guide=reading_guide(result), params=shown_params(result.mechanism),
        index_columns=INDEX_COLUMNS, index_rows=index_rows(result),
        estimate_columns=ESTIMATE_COLUMNS, estimates=estimate_rows(result),
        portfolio_columns=PORTFOLIO_COLUMNS, portfolio=portfolio_rows(result))
