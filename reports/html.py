"""One self-contained HTML report: Jinja2 with autoescaping, figures inlined as SVG."""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from dpaudit.reports import plots
from dpaudit.reports.text import (
    INDEX_COLUMNS,
    _plain_num,
    claims_rows,
    gdp_sentence,
    index_rows,
    reading_guide,
    release_text,
    shown_params,
    verdict_sentence,
)

__all__ = ["html"]

_ENV = Environment(loader=PackageLoader("dpaudit.reports", "templates"), autoescape=select_autoescape(["html", "j2"]))
_ENV.filters["num"] = _plain_num


def html(document: dict[str, Any]) -> str:
    """Render the report; every user-supplied string goes through autoescaping."""
    figures = [
        ("Certified epsilon (each index at its own confidence) against every applicable claim.",
         plots.epsilon_by_index(document)),
        ("Certified privacy profile under the claimed profiles.", plots.privacy_profile(document)),
        ("ROC of the distinguisher at the strongest index (log axes).", plots.roc(document)),
        ("Score histograms on S and S' at the strongest index.", plots.histograms(document)),
    ]
    return _ENV.get_template("report.html.j2").render(
        doc=document, sentence=verdict_sentence(document), gdp=gdp_sentence(document), figures=figures,
        release=release_text(document["mechanism"].get("release_grid")),
        claims=claims_rows(document["claims"], document.get("tightness", {}),
                           document["empirical"].get("epsilon_lower_bound")),
        guide=reading_guide(document), params=shown_params(document["mechanism"]),
        index_columns=INDEX_COLUMNS, index_rows=index_rows(document))
