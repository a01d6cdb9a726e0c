"""The words of a report: the verdict sentence and the Markdown rendering."""

from __future__ import annotations

from typing import Any

__all__ = ["claims_rows", "gdp_sentence", "markdown", "release_text", "verdict_sentence"]


def _fmt(value: Any, digits: int = 4) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


def verdict_sentence(document: dict[str, Any]) -> str:
    """One sentence in words: what was certified, at which confidence, against which claims."""
    emp = document["empirical"]
    where = "" if emp.get("index") is None else f" (strongest at canary index {emp['index']})"
    indices = document.get("per_index", [])
    scope = f" over {len(indices)} canary positions" if len(indices) > 1 else ""
    shown = (f"With confidence {emp['confidence']:g}{scope}, epsilon is at least "
             f"{emp['epsilon_lower_bound']:.3f} at delta = {emp['delta']:g}{where}.")
    verdict = document["verdict"]
    if verdict == "violation":
        return shown + " This contradicts the claims " + ", ".join(document["violations"]) + "."
    if verdict == "consistent":
        return shown + " This is consistent with every applicable claim: " + document["verdict_reason"] + "."
    return shown + " The audit is inconclusive: " + document["verdict_reason"] + "."


def release_text(grid: Any) -> str:
    if grid is None:
        return "outputs released as computed (a user function: its float bits are part of what is audited)"
    return (f"outputs snapped to multiples of {grid:g}; the claims assume this resolution "
            "(docs/theory.md 1.9)")


def gdp_sentence(document: dict[str, Any]) -> str:
    """The GDP fit, labelled as model-based: never part of the verdict."""
    emp = document["empirical"]
    model = emp.get("model_based_epsilon")
    implied = (f" Under that model epsilon at delta = {emp['delta']:g} would be {model:.3f}; this is "
               "model-based (assumes a Gaussian tradeoff), not a certified bound on epsilon."
               if model is not None else "")
    return (f"GDP fit: mu >= {emp['mu_lower_bound']:.3f} with confidence {emp['confidence']:g} (mu is the "
            f"shift between two unit Gaussians whose tradeoff the scores are compared with).{implied}")


def claims_rows(claims: list[dict[str, Any]], tightness: dict[str, Any]) -> list[list[str]]:
    """Rows ``name, relation, applicable, epsilon, tightness, slack, citation or reason``."""
    rows = []
    for claim in claims:
        ratio = tightness.get(claim["name"])
        rows.append([
            claim["name"], claim["relation"], "yes" if claim["applicable"] else "no",
            _fmt(claim["epsilon"]) if claim["applicable"] else "n/a",
            _fmt(ratio, 3) if ratio is not None else "",
            _fmt(claim.get("slack"), 3) if claim.get("slack") is not None else "",
            claim["citation"] if claim["applicable"] else f"not applicable: {claim['reason']}",
        ])
    return rows


def _escape_md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def markdown(document: dict[str, Any]) -> str:
    """The report in Markdown (user strings escaped)."""
    lines = [f"# {_escape_md(document['title'])}", "", f"**Verdict: {document['verdict']}.** "
             + _escape_md(verdict_sentence(document)), "", _escape_md(gdp_sentence(document)), ""]
    mech = document["mechanism"]
    lines += ["## Configuration", "", f"- mechanism: `{_escape_md(mech['name'])}`",
              "- parameters: " + ", ".join(f"`{_escape_md(k)}={_escape_md(v)}`" for k, v in mech["params"].items()),
              f"- release: {release_text(mech.get('release_grid'))}",
              f"- canary: {_escape_md(document['canary']['kind'])} ({document['canary']['relation']}), "
              f"indices {document['canary']['indices']}",
              f"- score: {_escape_md(document['attack']['score'])}; trials per dataset: {document['audit']['trials']}; "
              f"threshold: {document['audit']['threshold']}", ""]
    lines += ["## Claims", "", "| claim | relation | applicable | epsilon | tightness | slack | source |",
              "|---|---|---|---|---|---|---|"]
    for row in claims_rows(document["claims"], document.get("tightness", {})):
        lines.append("| " + " | ".join(_escape_md(cell) for cell in row) + " |")
    slack = document.get("theory_slack") or {}
    if slack.get("tightest"):
        exact = (f"; it is {slack['tightest_over_exact']:.3g} times the exact value of this instance"
                 if slack.get("tightest_over_exact") else "")
        lines += ["", f"Theory slack: the tightest valid claim is {_escape_md(slack['tightest'])} "
                      f"(epsilon {slack['tightest_epsilon']:.4g}){exact}; the slack column is each claim "
                      "divided by it."]
    if len(document.get("per_index", [])) > 1:
        lines += ["", "## By canary index", "", "| index | epsilon >= | mu (GDP) >= | verdict |", "|---|---|---|---|"]
        for row in document["per_index"]:
            emp = row["empirical"]
            lines.append(f"| {row['index']} | {emp['epsilon_lower_bound']:.4f} | {emp['mu_lower_bound']:.4f} "
                         f"| {row['verdict']} |")
    timings = document["timings"]
    lines += ["", "## Reproduction", "", f"- audit id `{document['audit_id']}`, seed {document['seed']}, "
              f"dpaudit {document['code_version']}",
              f"- {timings['seconds']:.1f} s wall, {timings.get('chunks_computed', 0)} chunks computed, "
              f"{timings.get('chunks_reused', 0)} reused", ""]
    return "\n".join(lines)
