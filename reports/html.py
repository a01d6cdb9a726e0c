"""One self-contained HTML report: Jinja2 with autoescaping, figures inlined as SVG."""

from __future__ import annotations

from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from dpaudit.reports import plots
from dpaudit.reports.text import claims_rows, gdp_sentence, release_text, verdict_sentence

__all__ = ["html"]

_ENV = Environment(loader=PackageLoader("dpaudit.reports", "templates"), autoescape=select_autoescape(["html", "j2"]))


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
        claims=claims_rows(document["claims"], document.get("tightness", {})),
        per_index=document["per_index"])
