"""The words of a report: verdict, reading guide, tables, and the Markdown rendering.

Every value taken from a result is escaped for Markdown by :func:`md`
(line breaks, HTML, link and image brackets, emphasis and table
characters), whether the result was just produced or loaded from a file
someone edited; numbers go through :func:`num`, which escapes whatever is
not a number. The HTML report uses the same sentences and rows, escaped by
Jinja2's autoescaping.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["claims_rows", "gdp_sentence", "index_rows", "markdown", "md", "num", "reading_guide",
           "release_text", "shown_params", "verdict_sentence"]

_LINE_BREAKS = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]+")
_MARKDOWN = re.compile(r"([\\`*_\[\]|#!~])")


def md(value: Any) -> str:
    """``value`` as inert Markdown on one line: no heading, link, image, emphasis, table cell or HTML."""
    text = "n/a" if value is None else str(value)
    text = _LINE_BREAKS.sub(" ", text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN.sub(r"\\\1", text)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def num(value: Any, spec: str = ".4g") -> str:
    """A number formatted with ``spec``; ``n/a`` for None; anything else escaped as text."""
    if value is None:
        return "n/a"
    if _number(value):
        try:
            return format(value, spec) if math.isfinite(value) else str(value)
        except ValueError:  # an int format for a float from an edited file
            return md(value)
    return md(value)


def _plain_num(value: Any, spec: str = ".4g") -> str:
    """Like :func:`num` without Markdown escaping (for the HTML report and sentences escaped later)."""
    if value is None:
        return "n/a"
    try:
        return format(value, spec) if _number(value) and math.isfinite(value) else str(value)
    except ValueError:
        return str(value)


def verdict_sentence(document: dict[str, Any]) -> str:
    """What was certified, at which confidence, against which claims (no model-based figure)."""
    emp = document["empirical"]
    where = "" if emp.get("index") is None else f", strongest at canary index {emp['index']}"
    indices = document.get("per_index", [])
    scope = f" over all {len(indices)} canary positions together" if len(indices) > 1 else ""
    shown = (f"Certified with confidence {_plain_num(emp['confidence'], 'g')}{scope}: epsilon is at least "
             f"{_plain_num(emp['epsilon_lower_bound'], '.3f')} at delta = {_plain_num(emp['delta'], 'g')}{where}.")
    verdict = document["verdict"]
    if verdict == "violation":
        return shown + " This contradicts the claims " + ", ".join(map(str, document["violations"])) + "."
    if verdict == "consistent":
        return shown + " This is consistent with every applicable claim: " + str(document["verdict_reason"]) + "."
    return shown + " The audit is inconclusive: " + str(document["verdict_reason"]) + "."


def gdp_sentence(document: dict[str, Any]) -> str:
    """The GDP fit, labelled as model-based and set apart from the certified bound."""
    emp = document["empirical"]
    model = emp.get("model_based_epsilon")
    implied = (f" If the mechanism's tradeoff were exactly Gaussian, epsilon at delta = {_plain_num(emp['delta'], 'g')} "
               f"would be {_plain_num(model, '.3f')}: this is model-based (assumes a Gaussian tradeoff), "
               "not a certified bound on epsilon, and the verdict does not use it."
               if model is not None else " This is model-based (assumes a Gaussian tradeoff); the verdict does not use it.")
    return (f"Model-based GDP fit: mu >= {_plain_num(emp['mu_lower_bound'], '.3f')} with confidence "
            f"{_plain_num(emp['confidence'], 'g')} (mu is the shift between two unit Gaussians whose tradeoff "
            f"the scores are compared with).{implied}")


def reading_guide(document: dict[str, Any]) -> list[tuple[str, str]]:
    """``(term, explanation)`` pairs of the "how to read this report" box."""
    emp = document["empirical"]
    count = len(document.get("per_index", []))
    per_index = emp.get("per_index_confidence")
    guide = [
        ("Certified lower bound", "epsilon is at least this value with the stated confidence, whatever the "
         "mechanism's internals; it comes from counting how often a test tells S from S' on trials it never "
         "used to choose the test. 0 means nothing was shown, not that the mechanism is private."),
        ("Claims", "upper bounds on epsilon from theory (accountants and theorems). A certified lower bound above "
         "an applicable claim is a violation; claims whose assumptions fail are listed as not applicable, "
         "with the reason."),
        ("Exact value", "where it can be computed, the epsilon of exactly this pair of datasets (a one-dimensional "
         "numerical accountant). No audit of this canary can certify more."),
        ("Statistical ceiling", "the largest bound this many trials could certify at this confidence even with "
         "the best possible test; a certified bound near the ceiling means more trials, not a better attack, "
         "would raise it."),
        ("Tightness", "certified lower bound divided by a claim: near 1 the claim is tight for this canary."),
    ]
    if count > 1 and per_index is not None:
        guide.append(("Per-index confidence", f"each of the {count} canary positions is certified at confidence "
                      f"{_plain_num(per_index, '.4g')}, so that all {count} statements hold together with the "
                      f"audit's confidence {_plain_num(emp['confidence'], 'g')} (a union bound)."))
    return guide


def release_text(grid: Any) -> str:
    if grid is None:
        return "outputs released as computed (a user function: its float bits are part of what is audited)"
    return (f"outputs snapped to multiples of {_plain_num(grid, 'g')}; the claims assume this resolution "
            "(docs/theory.md 1.9)")


def shown_params(mechanism: dict[str, Any]) -> dict[str, Any]:
    """The parameters that apply: those the mechanism lists as inapplicable and unset ones are hidden."""
    hidden = set(mechanism.get("inapplicable") or ())
    return {key: value for key, value in mechanism.get("params", {}).items()
            if key not in hidden and value is not None}


def claims_rows(claims: list[dict[str, Any]], tightness: dict[str, Any],
                certified: Any = None) -> list[list[str]]:
    """Rows ``name, index, relation, applicable, epsilon, tightness, slack, citation or reason`` (plain text).

    Tightness is the verdict's ratio where it has one, else ``certified / epsilon`` (the exact value's row).
    """
    rows = []
    for claim in claims:
        ratio = tightness.get(claim["name"])
        if ratio is None and claim["applicable"] and _number(certified) and _number(claim.get("epsilon")) \
                and claim["epsilon"] > 0:
            ratio = certified / claim["epsilon"]
        rows.append([
            str(claim["name"]), "all" if claim.get("index") is None else str(claim["index"]), str(claim["relation"]),
            "yes" if claim["applicable"] else "no",
            _plain_num(claim["epsilon"]) if claim["applicable"] else "n/a",
            _plain_num(ratio, ".3g") if ratio is not None else "",
            _plain_num(claim.get("slack"), ".3g") if claim.get("slack") is not None else "",
            str(claim["citation"]) if claim["applicable"] else f"not applicable: {claim['reason']}",
        ])
    return rows


def _tightest(row: dict[str, Any], relation: str | None) -> dict[str, Any] | None:
    bounds = [c for c in row["claims"] if c["applicable"] and c.get("kind", "upper-bound") == "upper-bound"
              and _number(c.get("epsilon")) and (relation is None or c["relation"] == relation)]
    slack = row.get("theory_slack") or {}
    named = [c for c in bounds if c["name"] == slack.get("tightest")]
    return named[0] if named else (min(bounds, key=lambda c: c["epsilon"]) if bounds else None)


def index_rows(document: dict[str, Any]) -> list[dict[str, str]]:
    """One row per canary position: certified bounds, tightest claim, exact value, ceiling, tightness, verdict."""
    rows = []
    relation = document.get("canary", {}).get("relation")
    for row in document.get("per_index", []):
        emp = row["empirical"]
        claim = _tightest(row, relation)
        exact = next((c.get("epsilon") for c in row["claims"] if c.get("kind") == "exact-instance"), None)
        certified = emp.get("epsilon_lower_bound")
        ratio = certified / claim["epsilon"] if claim and _number(certified) and claim["epsilon"] > 0 else None
        rows.append({
            "index": "-" if row.get("index") is None else str(row["index"]),
            "epsilon": _plain_num(certified, ".4f"), "mu": _plain_num(emp.get("mu_lower_bound"), ".4f"),
            "claim": str(claim["name"]) if claim else "none applicable",
            "claim_epsilon": _plain_num(claim["epsilon"]) if claim else "n/a",
            "exact": _plain_num(exact), "ceiling": _plain_num(row.get("ceiling")),
            "tightness": _plain_num(ratio, ".3g") if ratio is not None else "n/a",
            "verdict": str(row["verdict"]),
        })
    return rows


INDEX_COLUMNS = (("index", "index"), ("epsilon", "epsilon >= (certified)"), ("claim", "tightest claim"),
                 ("claim_epsilon", "claim epsilon"), ("tightness", "tightness"), ("exact", "exact value"),
                 ("ceiling", "ceiling"), ("mu", "mu >= (model-based)"), ("verdict", "verdict"))


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return (["| " + " | ".join(md(cell) for cell in header) + " |", "|" + "---|" * len(header)]
            + ["| " + " | ".join(md(cell) for cell in row) + " |" for row in rows])


def markdown(document: dict[str, Any]) -> str:
    """The report in Markdown; every value from the result is escaped (:func:`md`)."""
    mech, canary, audit = document["mechanism"], document["canary"], document["audit"]
    lines = [f"# {md(document['title'])}", "", f"**Verdict: {md(document['verdict'])}.** "
             + md(verdict_sentence(document)), "", "> " + md(gdp_sentence(document)), "",
             "## How to read this report", ""]
    lines += [f"- **{md(term)}**: {md(text)}" for term, text in reading_guide(document)]
    params = ", ".join(f"{md(k)} = {md(v)}" for k, v in shown_params(mech).items())
    indices = canary.get("indices") or []
    lines += ["", "## Configuration", "", f"- mechanism: {md(mech['name'])}", f"- parameters: {params}",
              f"- release: {md(release_text(mech.get('release_grid')))}",
              f"- canary: {md(canary['kind'])} ({md(canary['relation'])}), "
              f"{'positions ' + md(', '.join(map(str, indices))) if indices and indices[0] is not None else 'no positions'}",
              f"- score: {md(document['attack']['score'])}; trials per dataset: {num(audit['trials'], 'd')}; "
              f"threshold: {md(audit['threshold'])}", ""]
    strongest = document["empirical"].get("index")
    where = f" at the strongest canary index ({md(strongest)})" if strongest is not None else ""
    lines += [f"## Claims{where}", ""]
    lines += _table(["claim", "index", "relation", "applicable", "epsilon", "tightness", "slack", "source"],
                    claims_rows(document["claims"], document.get("tightness", {}),
                                document["empirical"].get("epsilon_lower_bound")))
    slack = document.get("theory_slack") or {}
    if slack.get("tightest"):
        exact = (f"; it is {num(slack['tightest_over_exact'], '.3g')} times the exact value of this instance"
                 if slack.get("tightest_over_exact") else "")
        lines += ["", f"Theory slack: the tightest valid claim is {md(slack['tightest'])} "
                      f"(epsilon {num(slack['tightest_epsilon'])}){exact}; the slack column is each claim "
                      "divided by it."]
    lines += ["", "## By canary index", ""]
    lines += _table([title for _, title in INDEX_COLUMNS],
                    [[row[key] for key, _ in INDEX_COLUMNS] for row in index_rows(document)])
    timings = document["timings"]
    lines += ["", "## Reproduction", "", f"- audit id {md(document['audit_id'])}, seed {num(document['seed'], 'd')}, "
              f"dpaudit {md(document['code_version'])}",
              f"- {num(timings.get('seconds'), '.1f')} s wall, {num(timings.get('chunks_computed', 0), 'd')} chunks "
              f"computed, {num(timings.get('chunks_reused', 0), 'd')} reused", ""]
    return "\n".join(lines)
