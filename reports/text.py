"""The words of a report: verdict, reading guide, the sentences beside its tables, and the Markdown rendering.

Values are escaped and numbers formatted by :mod:`dpaudit.reports.formatting`; the rows of the tables come from
:mod:`dpaudit.reports.tables` and the ceiling band's sentences from :mod:`dpaudit.reports.bands`. The HTML
report uses the same sentences and rows, escaped by Jinja2's autoescaping.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpaudit.auditing.jobs.result import AuditResult
from dpaudit.reports.anytime import anytime_lines
from dpaudit.reports.bands import BAND_WORDS, CEILING_WORDS, band_sentences, notable_sentences
from dpaudit.reports.float_rounding import float_rounding_lines
from dpaudit.reports.formatting import Result, _number, _plain_num, _table, md, num, typed
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

__all__ = ["conformance_lines", "estimators_note", "failure_split_text", "gdp_sentence", "looks_text", "markdown",
           "one_run_lines", "portfolio_choice_sentence", "profile_epsilon", "reading_guide", "release_text",
           "reported_sentence", "reproduction_text", "theory_slack_sentence", "verdict_sentence"]


def looks_text(result: Result) -> str:
    """How a sequential audit looked and what each look cost ("" for an audit that looks once), in the words of
    the headline, the command line's summary and the reading guide: ``5 planned looks of a sequential audit
    (every look taken, the last is look 5; this look's bound at confidence 0.975, each of the 4
    earlier looks' at 0.9938)``."""
    record = typed(result).sequential
    betas = list(record.get("beta_per_look") or ()) if record else []
    planned, stopped = (record.get("looks_planned"), record.get("stopped_at_look")) if record else (None, None)
    if not betas or not _number(planned) or not _number(stopped) or planned < 2:
        return ""  # one planned look: an audit that looks once, nothing to say about looks
    earlier = (f", each of the {len(betas) - 1} earlier looks' at {_plain_num(1 - betas[0], '.4g')}"
               if len(betas) > 1 else "")
    when = f"stopped early at look {stopped}" if stopped < planned else f"every look taken, the last is look {stopped}"
    return (f"{planned} planned looks of a sequential audit ({when}; this look's bound at "
            f"confidence {_plain_num(record.get('look_confidence'), '.4g')}{earlier})")


def verdict_sentence(result: Result) -> str:
    """What was certified, at which confidence, against which claims (no model-based figure)."""
    result = typed(result)
    emp = result.empirical
    where = "" if emp.index is None else f", strongest at canary index {emp.index}"
    scope = f" over all {len(result.per_index)} canary positions together" if len(result.per_index) > 1 else ""
    looks = looks_text(result)
    scope += f" over the {looks}" if looks else ""
    shown = (f"Certified with confidence {_plain_num(emp.confidence, 'g')}{scope}: epsilon is at least "
             f"{_plain_num(emp.epsilon_lower_bound, '.3f')} at delta = {_plain_num(emp.delta, 'g')}{where}.")
    if result.verdict == "violation":
        shown += " This contradicts the claims " + ", ".join(map(str, result.violations)) + "."
    elif result.verdict == "consistent":
        shown += " This is consistent with every applicable claim: " + str(result.verdict_reason) + "."
    else:
        shown += " The audit is inconclusive: " + str(result.verdict_reason) + "."
    return shown + reported_sentence(result)


def reported_sentence(result: Result) -> str:
    """The figures some tool reports for this mechanism although they do not apply (a Poisson accountant's
    value for shuffled batches) that the certified bound exceeds: the point of such an audit ("" if none)."""
    result = typed(result)
    bound = result.empirical.epsilon_lower_bound
    exceeded = [c for c in result.claims
                if c.reported_epsilon is not None and _number(bound) and bound > c.reported_epsilon]
    if not exceeded:
        return ""
    return "".join(f" It exceeds {_plain_num(c.reported_epsilon, '.4g')}, what {c.name} gives for this mechanism "
                   f"although it does not apply ({c.reason}): that figure understates the privacy loss."
                   for c in exceeded)


def gdp_sentence(result: Result) -> str:
    """The GDP fit, labelled as model-based and set apart from the certified bound."""
    result = typed(result)
    if result.one_run:  # a one-run audit's model-based figure is the Gaussian-pair estimate
        return str(result.one_run.get("model_based", ""))
    if result.anytime:
        return ("No model-based figure: the anytime-valid design certifies epsilon only, and fits no Gaussian "
                "tradeoff to its scores.")
    emp = result.empirical
    model = emp.model_based_epsilon
    implied = (f" If the mechanism's tradeoff were exactly Gaussian, epsilon at delta = {_plain_num(emp.delta, 'g')} "
               f"would be {_plain_num(model, '.3f')}: this is model-based (assumes a Gaussian tradeoff), "
               "not a certified bound on epsilon, and the verdict does not use it."
               if model is not None else " This is model-based (assumes a Gaussian tradeoff); the verdict does not use it.")
    return (f"Model-based GDP fit: mu >= {_plain_num(emp.mu_lower_bound, '.3f')} with confidence "
            f"{_plain_num(emp.confidence, 'g')} (mu is the shift between two unit Gaussians whose tradeoff "
            f"the scores are compared with).{implied}")


def one_run_lines(result: AuditResult) -> list[str]:
    """The one-run section of the Markdown report: what was certified and under which assumptions, in the
    result's own words (``result.one_run``; the HTML report prints the same sentences)."""
    record = result.one_run
    lines = ["## One-run audit", "", md(record.get("statement")), "", "Assumptions:", ""]
    lines += [f"- {md(item)}" for item in record.get("assumptions") or ()]
    return lines + [""]


def conformance_lines(result: AuditResult) -> list[str]:
    """The conformance section of the Markdown report (``result.conformance``; the HTML prints the same)."""
    record = result.conformance
    claimed = record.get("claimed_epsilon")
    lines = ["## Conformance", "", f"- library: {md(record.get('library'))}",
             f"- relation audited: {md(record.get('relation'))}",
             f"- claimed by the library's accountant: {'none for this relation' if claimed is None else num(claimed)}",
             f"- certified: {num(record.get('certified_epsilon'))} ({md(record.get('verdict'))})",
             f"- the evidence points at: {md(', '.join(record.get('points_at') or ()) or 'no assumption')}", "",
             md(record.get("statement")), ""]
    return lines + _table(["assumption", "the accountant assumes", "holds", "the code"], conformance_rows(result)) \
        + [""]


def reading_guide(result: Result) -> list[tuple[str, str]]:
    """``(term, explanation)`` pairs of the "how to read this report" box."""
    result = typed(result)
    emp = result.empirical
    count = len(result.per_index)
    per_index = emp.per_index_confidence
    guide = [
        ("Certified lower bound", "epsilon is at least this value with the stated confidence, whatever the "
         "mechanism's internals; it comes from counting how often a test tells S from S' on trials it never "
         "used to choose the test. 0 means nothing was shown, not that the mechanism is private."),
        ("Claims", "upper bounds on epsilon from theory (accountants and theorems). A certified lower bound above "
         "an applicable claim is a violation; claims whose assumptions fail are listed as not applicable, "
         "with the reason."),
        ("Exact value", "where it can be computed, the epsilon of exactly this pair of datasets (a one-dimensional "
         "numerical accountant). No audit of this canary can certify more."),
        ("Statistical ceiling", CEILING_WORDS),
        ("Ceiling band", BAND_WORDS),
        ("Tightness", "certified lower bound divided by a claim: near 1 the claim is tight for this canary."),
    ]
    sources = sorted({row.ceiling_source for row in result.per_index if row.ceiling_source})
    if sources:
        guide.append(("Simulated ceiling", "the score's law behind a ceiling marked (simulated) is "
                      + "; ".join(sources) + ": the ceiling and its band carry that sampling error."))
    if count > 1 and per_index is not None:
        guide.append(("Per-index confidence", f"each of the {count} canary positions is certified at confidence "
                      f"{_plain_num(per_index, '.4g')}, so that all {count} statements hold together with the "
                      f"audit's confidence {_plain_num(emp.confidence, 'g')} (a union bound)."))
    if result.anytime:
        guide.append(("Anytime-valid", "the certified bound holds at the stated confidence at every number of "
                      "trials together (a confidence sequence from betting e-processes, docs/theory.md 13): the audit "
                      "may stop at the first certified violation, or watch longer, without paying for its looks."))
    if result.one_run:
        guide.append(("One run", "here the trials are canaries of one training run (or a few pooled): each was "
                      "included or not by a fair coin before training, and the test counts how often the trained "
                      "model tells which; the one-run section says which test certified and under which "
                      "assumptions."))
    looks = looks_text(result)
    if looks:
        same = result.sequential.get("same_trials_as")
        record = result.sequential
        guide.append(("Sequential audit", f"this audit looked at its trials after "
                      f"{', '.join(map(str, record.get('looks') or ()))} certification chunks (dpaudit check, "
                      "assert_private), to stop at the first certified violation. Each look pays for itself: "
                      f"the failure probability {_plain_num(1 - emp.confidence, '.3g')} is split over the looks, "
                      "half to the last and the rest equally to the earlier ones, so every look's statement holds "
                      f"together at {_plain_num(emp.confidence, 'g')}, and the bound is lower than one look at the "
                      "same trials certifies"
                      + (f" (dpaudit run: audit id {same})" if same else "")
                      + ". That is why it has an audit id, and report file names, of its own."))
    if result.attack.get("portfolio"):
        uncontested = any(c.get("applicable") and c.get("epsilon") is None for c in result.attack["portfolio"])
        guide.append(("Portfolio", "several scores were fitted on part of the calibration trials and judged on "
                      "the rest; only the strongest certified, on trials none of them saw, so the choice costs "
                      "nothing in the confidence. Calibration strengths are not certified. Strengths at or below 0 "
                      "(no score resolves an effect at this budget) tie, and equal strengths are ordered by the mu "
                      "bound on the held-out scores."
                      + portfolio_choice_sentence(result)
                      + (" Where a score's fit said it reads the whole output (the discrete score's outcome "
                         "table), it was taken without a contest and the others are listed as not judged."
                         if uncontested else "")))
    return guide


def failure_split_text(result: Result) -> str:
    """How the headline's failure probability was split by a union bound, each part named (the HTML report's
    footnote): the conditional method's odds-ratio bound and three single-rate bounds, or two error rates
    at each certified threshold."""
    split = typed(result).empirical.epsilon.get("failure_split") or {}
    beta, per_rate = split.get("beta"), split.get("per_rate")
    if not (_number(beta) and _number(per_rate)):
        return ""
    if _number(split.get("odds_ratio")):
        return (f"Failure probability {_plain_num(beta, '.3g')} split by a union bound: "
                f"{_plain_num(split['odds_ratio'], '.3g')} to the conditional bound on the odds ratio of the test's "
                f"two regions, and {_plain_num(per_rate, '.3g')} to each of {split.get('rates')} Clopper-Pearson "
                "bounds on single rates (the likely region's rate from above and below, the rare region's from "
                "below), at 1 threshold.")
    thresholds = split.get("thresholds", 1)
    return (f"Failure probability {_plain_num(beta, '.3g')} split by a union bound over the {split.get('rates')} "
            f"error rates (false positives and false negatives) at {thresholds} threshold"
            f"{'s' if thresholds != 1 else ''}: {_plain_num(per_rate, '.3g')} each.")


def portfolio_choice_sentence(result: Result) -> str:
    """Why a position's certifying score is not the one with the largest strength in the portfolio table, where
    it is not ("" where it is): a tie at or below 0 broken by the mu bound, or a stronger score whose fit on
    all calibration trials failed."""
    sentences = []
    candidates = [c for c in typed(result).attack.get("portfolio") or ()
                  if c.get("applicable") and _number(c.get("epsilon"))]
    for index in dict.fromkeys(c.get("index") for c in candidates):
        here = [c for c in candidates if c.get("index") == index]
        chosen = next((c for c in here if c.get("chosen")), None)
        strongest = max(here, key=lambda c: c["epsilon"])
        if chosen is None or chosen["epsilon"] >= strongest["epsilon"]:
            continue
        where = "" if index is None else f" at canary index {index}"
        if strongest.get("reason"):
            why = f"{strongest['name']} was stronger on the held-out calibration but {strongest['reason']}"
        else:  # both at or below 0: a tie, the mu bound decided
            why = (f"{strongest['name']}'s strength {_plain_num(strongest['epsilon'], '.4g')} and "
                   f"{chosen['name']}'s {_plain_num(chosen['epsilon'], '.4g')} are both at or below 0 and tie; "
                   f"the mu bound chose {chosen['name']}")
        sentences.append(f" {chosen['name']} certified{where}: {why}.")
    return "".join(sentences)


def release_text(grid: Any) -> str:
    if grid is None:
        return "outputs released as computed (a user function: its float bits are part of what is audited)"
    return (f"outputs snapped to multiples of {_plain_num(grid, 'g')}; the claims assume this resolution "
            "(docs/theory.md 1.9)")


def reproduction_text(result: Result) -> str:
    """``seed N``, and for a mechanism whose randomness the seed does not fix (``seeded`` False) that a rerun
    draws other trials."""
    result = typed(result)
    text = f"seed {num(result.seed, 'd')}"
    if result.mechanism.get("seeded", True) is False:
        text += (" (not reproducible from it: the mechanism draws randomness the seed does not fix, so a rerun "
                 "draws other trials)")
    return text


def theory_slack_sentence(result: Result) -> str:
    """The tightest valid claim, and how far it is from the exact value of the instance ("" without a claim)."""
    slack = typed(result).theory_slack or {}
    if not slack.get("tightest"):
        return ""
    ratio = slack.get("tightest_over_exact")
    if _number(ratio) and format(ratio, ".3g") == "1":
        exact = "; it equals the exact value of this instance to 3 digits (the claim is tight here)"
    elif _number(ratio):
        exact = f"; it is {_plain_num(ratio, '.3g')} times the exact value of this instance"
    else:
        exact = ""
    return (f"Theory slack: the tightest valid claim is {slack['tightest']} "
            f"(epsilon {_plain_num(slack.get('tightest_epsilon'))}){exact}; the slack column is each claim "
            "divided by it.")


def profile_epsilon(result: Result) -> float | None:
    """The largest epsilon of the privacy profile's grid whose certified delta exceeds the audit's delta: the
    epsilon the profile estimator implies at that delta (None without a profile or where it implies nothing)."""
    emp = typed(result).empirical
    profile = next((e.record for e in emp.estimates if e.name == "profile"), None) or {}
    implied = [float(eps) for eps, low in zip(profile.get("epsilons") or (), profile.get("delta_lower_bounds") or ())
               if low is not None and low > emp.delta]
    return max(implied) if implied else None


#: What the report says of an epsilon test placed otherwise than by the calibration counts, by the epsilon
#: record's ``placement`` (``audit.statistics.estimators.plan_epsilon``)
PLACEMENT_SENTENCES = {
    "tilt": ("Its test was placed by the exponential tilt fitted to the calibration scores (their log likelihood "
             "ratio read as a straight line in the score, docs/theory.md 7), not by their counts; the trials that "
             "certify it took no part in placing it."),
}


def estimators_note(result: Result) -> str:
    """Why the headline is the ``epsilon`` estimator even where a listed one shows more on the same trials, and
    how its test was placed where that was not by the calibration counts (:data:`PLACEMENT_SENTENCES`)."""
    result = typed(result)
    emp = result.empirical
    headline = next((e for e in emp.estimates if e.name == "epsilon"), None)
    placed = PLACEMENT_SENTENCES.get(str((emp.epsilon or {}).get("placement")))
    placed = f" {placed}" if placed else ""
    if headline is None or len(emp.estimates) < 2:
        return "Each estimator's statement holds at its own confidence." + placed
    note = (f"Each estimator's statement holds at its own confidence. The headline is the epsilon estimator "
            f"({headline.method}), named before any trial was drawn.{placed}")
    implied = profile_epsilon(result)
    if implied is not None and implied > headline.value:
        beta = 1 - headline.confidence
        note += (f" The privacy profile implies more on the same trials, epsilon >= {_plain_num(implied, '.4g')} at "
                 f"delta = {_plain_num(emp.delta, 'g')}, but taking the larger of the two after seeing both is not "
                 f"covered by the confidence {_plain_num(headline.confidence, 'g')}: both statements hold together "
                 f"at {_plain_num(1 - 2 * beta, 'g')} (a union bound).")
    return note


#: How a trained model's target record was chosen and where its trainings started (``canary`` keys of the result,
#: ``audit.jobs.job``), each a line of the configuration where present.
TARGET_LINES = (("target_record", "target record"), ("start", "start"))


def schedule_text(canary: Mapping[str, Any]) -> str:
    """``, inserted every 5 steps`` or ``, inserted at steps 1, 40`` for a scheduled canary ("" otherwise)."""
    if canary.get("every") is not None:
        return f", inserted every {canary['every']} steps (docs/theory.md 10)"
    steps = canary.get("steps")
    if steps:
        shown = ", ".join(map(str, steps[:10])) + (", ..." if len(steps) > 10 else "")
        return f", inserted at steps {shown} (docs/theory.md 10)"
    return ""


def markdown(result: Result) -> str:
    """The report in Markdown; every value from the result is escaped (:func:`md`)."""
    result = typed(result)
    mech, canary, audit = result.mechanism, result.canary, result.audit
    lines = [f"# {md(result.title)}", "", f"**Verdict: {md(result.verdict)}.** "
             + md(verdict_sentence(result)), ""]
    lines += [f"**{md(sentence)}**\n" for sentence in notable_sentences(result)]
    lines += [f"{md(sentence)}\n" for sentence in band_sentences(result)]
    lines += ["> " + md(gdp_sentence(result)), "", "## How to read this report", ""]
    if result.one_run:
        lines[-2:-2] = one_run_lines(result)
    if result.conformance:
        lines[-2:-2] = conformance_lines(result)
    if result.anytime:
        lines[-2:-2] = anytime_lines(result, md)
    if result.float_rounding:
        lines[-2:-2] = float_rounding_lines(result, md)
    lines += [f"- **{md(term)}**: {md(text)}" for term, text in reading_guide(result)]
    params = ", ".join(f"{md(k)} = {md(v)}" for k, v in shown_params(mech).items())
    indices = canary.get("indices") or []
    score = result.attack.get("score")
    lines += ["", "## Configuration", "", f"- mechanism: {md(mech['name'])}", f"- parameters: {params}",
              f"- release: {md(release_text(mech.get('release_grid')))}",
              f"- canary: {md(canary['kind'])} ({md(canary['relation'])}), "
              f"{'positions ' + md(', '.join(map(str, indices))) if indices and indices[0] is not None else 'no positions'}"
              f"{md(schedule_text(canary))}",
              f"- score: {md(', '.join(map(str, score)) if isinstance(score, list) else score)}; "
              + (f"design: one-run, {num(result.one_run.get('canaries'), 'd')} canaries per run, "
                 f"{num(result.one_run.get('runs'), 'd')} run(s)" if result.one_run else
                 f"design: anytime-valid, {num(audit['trials'], 'd')} trials per dataset drawn of a budget of "
                 f"{num(audit.get('budget'), 'd')} (first chunk {num(audit.get('first_chunk'), 'd')})"
                 if result.anytime else
                 f"trials per dataset: {num(audit['trials'], 'd')}; threshold: {md(audit['threshold'])}"), ""]
    lines[-1:-1] = [f"- {label}: {md(canary[key])}" for key, label in TARGET_LINES if canary.get(key)]
    strongest = result.empirical.index
    where = f" at the strongest canary index ({md(strongest)})" if strongest is not None else ""
    lines += [f"## Claims{where}", ""]
    lines += _table(["claim", "index", "relation", "applicable", "epsilon", "tightness", "slack", "source"],
                    claims_rows(result.claims, result.tightness, result.empirical.epsilon_lower_bound))
    slack = theory_slack_sentence(result)
    if slack:
        lines += ["", md(slack)]
    lines += ["", "## By canary index", ""]
    lines += _table([title for _, title in INDEX_COLUMNS],
                    [[row[key] for key, _ in INDEX_COLUMNS] for row in index_rows(result)])
    estimates = estimate_rows(result)
    if estimates:
        lines += ["", "## Estimators", "", md(estimators_note(result)), ""]
        lines += _table(ESTIMATE_COLUMNS, estimates)
    candidates = portfolio_rows(result)
    if candidates:
        lines += ["", "## Scores tried (portfolio)", ""]
        lines += _table(PORTFOLIO_COLUMNS, candidates)
    timings = result.timings
    lines += ["", "## Reproduction", "", f"- audit id {md(result.audit_id)}, {md(reproduction_text(result))}, "
              f"dpaudit {md(result.code_version)}",
              f"- {num(timings.get('seconds'), '.1f')} s wall, {num(timings.get('chunks_computed', 0), 'd')} chunks "
              f"computed, {num(timings.get('chunks_reused', 0), 'd')} reused", ""]
    return "\n".join(lines)
