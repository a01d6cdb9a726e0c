"""One self-contained HTML report: Jinja2 with autoescaping, figures inlined as SVG."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from dpaudit.reports import plots
from dpaudit.reports.anytime import ANYTIME_CAPTION, anytime_sentences
from dpaudit.reports.captions import ceiling_caption, histogram_caption, profile_caption, roc_caption
from dpaudit.reports.float_rounding import TITLE as FLOAT_ROUNDING_TITLE
from dpaudit.reports.float_rounding import float_rounding_sentences
from dpaudit.reports.bands import band_sentences, notable_sentences
from dpaudit.reports.formatting import _plain_num, typed
from dpaudit.reports.tables import (
    ESTIMATE_COLUMNS,
    INDEX_COLUMNS,
    PORTFOLIO_COLUMNS,
    claims_rows,
    conformance_rows,
    estimate_rows,
    index_rows,
    portfolio_rows,
    shown_params,
)
from dpaudit.reports.text import (
    estimators_note,
    failure_split_text,
    gdp_sentence,
    reading_guide,
    release_text,
    reproduction_text,
    theory_slack_sentence,
    verdict_sentence,
)

__all__ = ["figure_list", "html", "summary_figure"]

_ENV = Environment(loader=PackageLoader("dpaudit.reports", "templates"), autoescape=select_autoescape(["html", "j2"]))
_ENV.filters["num"] = _plain_num


def figure_list(result: Any) -> list[tuple[str, Callable[[Any], str]]]:
    """``(caption, draw)`` of each figure the report shows: every caption says what to look for.

    The by-position figure only with two or more positions; with one, the certified bound on a line
    against its tightest claim, exact value and ceiling band.
    """
    result = typed(result)
    if len(result.per_index) > 1:
        first = ("Look for the black line against the grey band: inside it, more trials (not a better attack) "
                 "would raise the bound; below its bottom, this audit's test was weaker than the ideal one; above "
                 "its top is notable, above the tightest claim a violation.",
                 plots.epsilon_by_index)
    else:
        first = (ceiling_caption(result), plots.ceiling_band)
    figures = [first,
               (profile_caption(result), plots.privacy_profile),
               (roc_caption(result), plots.roc),
               (histogram_caption(result), plots.histograms)]
    return figures


def summary_figure(result: Any) -> tuple[str, str]:
    """``(caption, svg)`` of the report's first figure: epsilon by position (two or more positions) or the
    certified bound against its claim and ceiling band (one)."""
    result = typed(result)
    caption, draw = figure_list(result)[0]
    return caption, draw(result)


def html(result: Any) -> str:
    """Render the report of an :class:`AuditResult` (or its document); every user-supplied string goes
    through autoescaping."""
    result = typed(result)
    if result.one_run:  # one run certifies one epsilon from canary scores: no profile, no positions
        figures = [("ROC of the canary score: included against excluded canaries (log axes; not certified).",
                    plots.roc(result)),
                   ("Canary scores: S are the included canaries, S' the excluded ones.", plots.histograms(result))]
    elif result.anytime:  # a running bound instead of a profile: the design certifies epsilon only
        figures = [(ANYTIME_CAPTION, plots.running_bound(result)),
                   ("ROC of the last score on every trial (a figure, not certified).", plots.roc(result)),
                   ("Histogram of the last score on every trial of S and of S' (a figure, not certified).",
                    plots.histograms(result))]
    else:
        figures = [(caption, draw(result)) for caption, draw in figure_list(result)]
    return _ENV.get_template("report.html.j2").render(
        doc=result, sentence=verdict_sentence(result), gdp=gdp_sentence(result), figures=figures,
        notable=notable_sentences(result), bands=band_sentences(result),
        release=release_text(result.mechanism.get("release_grid")), reproduction=reproduction_text(result),
        claims=claims_rows(result.claims, result.tightness, result.empirical.epsilon_lower_bound),
        guide=reading_guide(result), params=shown_params(result.mechanism), theory_slack=theory_slack_sentence(result),
        index_columns=INDEX_COLUMNS, index_rows=index_rows(result),
        estimate_columns=ESTIMATE_COLUMNS, estimates=estimate_rows(result),
        portfolio_columns=PORTFOLIO_COLUMNS, portfolio=portfolio_rows(result),
        conformance=conformance_rows(result),
        anytime=anytime_sentences(result) if result.anytime else [], estimators_note=estimators_note(result),
        failure_split=failure_split_text(result),
        float_rounding=float_rounding_sentences(result), float_rounding_title=FLOAT_ROUNDING_TITLE)
