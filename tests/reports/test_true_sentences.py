"""Every templated sentence of a report is true of the audit it describes (issue 73).

Reports of varied audits (an Opacus training under add/remove, several canary positions, shuffled batches
against the Poisson value reported for them, a sequential audit that took every look and one that stopped
early, a user's function) are rendered as Markdown and HTML, and :func:`untrue_sentences` checks each
claim a template makes against the result's fields: the verdict and the certified figure, the positions and
looks the headline speaks of, the claim it calls the smallest and where, the reported figure it says the bound
exceeds, what S' is in the histogram's legend, which elements the figure captions say are drawn, whether the
bars it calls hard to see are, why a certifying score is not the strongest in the portfolio table, and that a
score's reason for not applying is not false of the mechanism, and that the estimators' note names the
exponential tilt exactly when it placed the test. The last test makes sentences untrue, one at a time, and
shows the checker names each: a check that cannot fail would prove nothing.

The audits use fixed seeds; the figures they print are not asserted beyond what the sentences say of them.
"""

from __future__ import annotations

import html
import re
from typing import Any

import numpy as np
import pytest

import dpaudit
from dpaudit.auditing.jobs.config import parse_config
from dpaudit.auditing.jobs.runner import RunOptions
from dpaudit.auditing.statistics.verdict import applicable_bounds
from dpaudit.reports.captions import THIN, _tail_heights, certifying_test, exact_value, neighbour_label
from dpaudit.reports.render import render
from dpaudit.reports.formatting import typed
from dpaudit.reports.tables import strongest_row, tightest_claim
from dpaudit.reports.text import PLACEMENT_SENTENCES, looks_text
from tests.helpers import run_documents

THREE = {"title": "projected kernel, three canary positions",
         "mechanism": {"name": "projected-kernel", "n": 8, "sigma": 0.5, "domain": "whole"},
         "canary": {"kind": "reset", "index": [1, 4, 8]}, "audit": {"trials": 4000, "chunk_size": 2000}}


def _headline(markdown: str) -> str:
    """The Markdown report's headline, its escapes undone."""
    return re.sub(r"\\(.)", r"\1", markdown.splitlines()[2])


def _fmt(value: float, spec: str) -> str:
    return format(value, spec)


def untrue_sentences(result: Any, markdown: str, page: str) -> list[str]:
    """The templated claims of the two reports of ``result`` that its fields contradict (empty when all hold)."""
    result = typed(result)
    emp, problems = result.empirical, []
    headline = _headline(markdown)
    # the verdict and the certified figure
    if f"**Verdict: {result.verdict}.**" not in headline:
        problems.append(f"verdict word is not {result.verdict!r}")
    if f"epsilon is at least {_fmt(emp.epsilon_lower_bound, '.3f')} at delta = {emp.delta:g}" not in headline:
        problems.append("the headline's certified figure or delta is not the result's")
    # positions and looks: said when there are several, and as they are
    positions = re.search(r"over all (\d+) canary positions together", headline)
    if (positions is not None) != (len(result.per_index) > 1) or (
            positions and int(positions.group(1)) != len(result.per_index)):
        problems.append("the headline's number of canary positions is not the result's")
    record = result.sequential or {}
    planned, stopped = record.get("looks_planned", 1), record.get("stopped_at_look", 1)
    if ("planned looks" in headline) != (planned > 1):
        problems.append("the headline speaks of looks that were not planned, or is silent about planned ones")
    if "stopped early" in headline and not stopped < planned:
        problems.append(f"the headline says the audit stopped early; it took look {stopped} of {planned}")
    if planned > 1 and stopped < planned and f"stopped early at look {stopped}" not in headline:
        problems.append(f"the audit stopped at look {stopped} of {planned}; the headline does not say so")
    # the claim the headline calls the smallest is the smallest applicable claim at the position it names
    smallest = re.search(r"the smallest is ([\w.-]+) \(([\d.e+-]+)\)", headline)
    if smallest:
        named_index = re.search(r"at canary index (\d+), the strongest position", headline)
        row = strongest_row(result)
        if len(result.per_index) > 1 and (named_index is None or int(named_index.group(1)) != row.index):
            problems.append("the smallest claim is stated without the position it holds at")
        bounds = applicable_bounds(row.claims, result.canary.get("relation"))
        least = min(bounds, key=lambda c: c.epsilon) if bounds else None
        if least is None or (least.name, _fmt(least.epsilon, ".4g")) != smallest.groups():
            problems.append(f"the smallest claim {smallest.groups()} is not the smallest at the strongest position")
    # a reported figure that does not apply is named exactly when the bound exceeds it
    for claim in result.claims:
        if claim.reported_epsilon is None:
            continue
        said = f"It exceeds {_fmt(claim.reported_epsilon, '.4g')}, what {claim.name} gives" in headline
        if said != (emp.epsilon_lower_bound > claim.reported_epsilon):
            problems.append(f"the headline {'names' if said else 'omits'} {claim.name}'s reported figure")
    for said in re.findall(r"It exceeds ([\d.e+-]+), what ([\w.-]+) gives", headline):
        if not any(c.name == said[1] and c.reported_epsilon is not None for c in result.claims):
            problems.append(f"the headline names {said[1]} as a reported figure; the result has none")
    # what S' is, in the histogram's legend: of the pair's relation
    relation, pair = str(result.canary.get("relation")), result.canary.get("pair")
    legend = neighbour_label(result)
    if legend not in page and html.escape(legend) not in page:
        problems.append("the histogram's legend is not drawn from the pair")
    if "replaced by its opposite" in page and pair != "opposite":
        problems.append(f"the legend says S' holds the canary's opposite; the pair is {pair!r} ({relation})")
    if relation == "add-remove" and not ("without the canary record" in legend or "added or removed" in legend):
        problems.append("an add/remove pair's legend does not say S' lacks the canary record")
    # captions name only what their figures draw
    captions = [" ".join(text.split()) for text in re.findall(r"<figcaption[^>]*>(.*?)</figcaption>", page, re.S)]
    row = strongest_row(result)
    if len(result.per_index) == 1 and not result.one_run and not result.anytime:
        first = captions[0]
        drawn = (exact_value(row), tightest_claim(row, relation), row.ceiling_band)
        if "no claim, ceiling or exact value is known" in first:  # the caption of a figure with the dot alone
            if any(element is not None for element in drawn):
                problems.append("the first caption says nothing is drawn beside the bound; something is")
        else:
            if ("exact value" in first) != (drawn[0] is not None):
                problems.append("the first caption's exact value is not what the figure draws")
            if ("tightest claim" in first) != (drawn[1] is not None):
                problems.append("the first caption's tightest claim is not what the figure draws")
            if ("(grey)" in first) != (drawn[2] is not None):
                problems.append("the first caption's ceiling band is not what the figure draws")
    place = certifying_test(result)
    thin = any("hard to see" in caption for caption in captions)
    if place is not None and not result.one_run and not result.anytime:
        upper = place["above"] != place["far"]
        tall_a, tall_b = _tail_heights(result, place["threshold"], upper)
        few, many = (tall_b, tall_a) if place["far"] else (tall_a, tall_b)
        if thin and not few < THIN * many:
            problems.append(f"a caption calls bars hard to see that stand {few} against {many}")
    # the portfolio: the certified score is the strongest in its table, or the report says why not
    for index in {c.get("index") for c in result.attack.get("portfolio") or ()}:
        judged = [c for c in result.attack["portfolio"] if c.get("index") == index and c.get("applicable")
                  and c.get("epsilon") is not None]
        chosen = next((c for c in judged if c.get("chosen")), None)
        if chosen and any(c["epsilon"] > chosen["epsilon"] for c in judged) and (
                f"{chosen['name']} certified" not in markdown):
            problems.append(f"{chosen['name']} certified at {index} below a stronger score, unexplained")
    # a score's reason for not applying is not false of the mechanism
    if any("trains a model" in str(c.get("reason")) for c in result.attack.get("portfolio") or ()) and (
            result.mechanism.get("name") in ("opacus", "model")):
        problems.append(f"a reason says {result.mechanism['name']!r} does not train a model")
    # the footnote's split of the failure probability names every part it was split into
    split = emp.epsilon.get("failure_split") or {}
    if "odds_ratio" in split and f"{split['odds_ratio']:.3g} to the conditional bound on the odds ratio" not in page:
        problems.append("the failure probability's share for the odds ratio is not stated")
    if "per_rate" in split and f"{split['per_rate']:.3g}" not in page.split("Failure probability", 1)[-1][:400]:
        problems.append("the failure probability's share per rate is not the record's")
    if looks_text(result) and looks_text(result) not in markdown:
        problems.append("the looks' sentence is not the one the record gives")
    # how the test was placed: the tilt is named exactly when it placed the certified test
    tilted = (emp.epsilon or {}).get("placement") == "tilt"
    if ("placed by the exponential tilt" in markdown) != tilted:
        problems.append(f"the estimators' note {'omits' if tilted else 'names'} the tilt as the test's placement")
    return problems


def _reports(result) -> tuple[Any, str, str]:
    return typed(result), render(result, "md"), render(result, "html")


@pytest.fixture(scope="module")
def audits(tmp_path_factory) -> dict[str, tuple[Any, str, str]]:
    found: dict[str, tuple[Any, str, str]] = {}
    # several canary positions, each judged against its own claims
    store = tmp_path_factory.mktemp("sentences") / "s.sqlite"
    (three,) = run_documents(parse_config(THREE), RunOptions(store=str(store), workers=1, progress=False))
    found["positions"] = _reports(three)
    # shuffled batches against the Poisson accountant's value reported for them
    shuffled = dpaudit.make("dp-sgd", n=300, dim=1, batch_size=10, steps=30, noise_std=0.1, sampling="shuffle",
                            output="iterates")
    found["shuffled"] = _reports(dpaudit.audit(shuffled, score="exact", trials=6000, delta=1e-5, seed=0))
    # a sequential audit that takes every look, and one that stops at its first
    summary = dpaudit.assert_private(dpaudit.make("gaussian", sigma=2.0), epsilon=5.0, delta=1e-5, trials=16000,
                                     chunk_size=1000, seed=0)
    found["every look"] = _reports(summary["result"])
    with pytest.raises(dpaudit.PrivacyViolation) as stopped:
        dpaudit.assert_private(dpaudit.make("gaussian", sigma=0.2), epsilon=1.0, delta=1e-5, trials=16000,
                               chunk_size=1000, seed=0)
    found["stopped early"] = _reports(stopped.value.result)

    # a user's function, black box: a noisy sum on a grid, under a claim stated by the caller
    def noisy_sum(records, rng):
        value = np.clip(records[:, 0], -1.0, 1.0).sum() + rng.normal(0.0, 2.0)
        return [np.round(value * 4096) / 4096]

    neighbours = (np.zeros((10, 1)), np.vstack([[1.0], np.zeros((9, 1))]))
    user = dpaudit.from_callable(noisy_sum, output_dim=1)
    found["user function"] = _reports(dpaudit.audit(user, dataset_pair=neighbours, trials=6000, delta=1e-5, seed=0,
                                                    claimed_epsilon=1.99))

    # a test placed by the exponential tilt: the median score of parallel Laplace declares it
    def parallel_laplace(records, rng, trials):
        return float(np.ravel(records)[0]) + rng.laplace(0.0, 10.0, (trials, 10))

    parallel = dpaudit.from_batched_callable(parallel_laplace, 10, name="parallel-laplace")
    found["tilt"] = _reports(dpaudit.audit(parallel, dataset_pair=(np.array([0.0]), np.array([1.0])), trials=20_000,
                                           delta=0.0, score="median", seed=1))
    return found


@pytest.fixture(scope="module")
def opacus_audit() -> tuple[Any, str, str]:
    pytest.importorskip("opacus", reason="Opacus is an optional extra: pip install 'dpaudit[models]'")
    # imported here: Opacus is optional, and its import loads torch's compiler stack
    from dpaudit.auditing.checks.zoo.dpsgd import mean_output, zero_linear
    from dpaudit.mechanisms.adapters import from_opacus

    training = from_opacus(zero_linear(200), records=np.zeros((12, 1)), batch_size=4, noise_multiplier=1.0,
                           criterion=mean_output)
    return _reports(dpaudit.audit(training, dataset_pair=training.neighbours(), trials=1_000, delta=1e-5, seed=0))


def test_every_templated_sentence_holds_for_varied_audits(audits):
    for name, (result, markdown, page) in audits.items():
        assert untrue_sentences(result, markdown, page) == [], name
    # what each audit is there for: the sentence it tests is in its headline
    assert "at canary index" in _headline(audits["positions"][1]) and "the strongest position" in _headline(
        audits["positions"][1])
    assert "what poisson-as-reported gives" in _headline(audits["shuffled"][1])
    assert "every look taken" in _headline(audits["every look"][1])
    assert "stopped early at look" in _headline(audits["stopped early"][1])
    assert "placed by the exponential tilt" in audits["tilt"][1]


def test_an_opacus_audit_under_add_remove_says_so_in_its_legend_and_reasons(opacus_audit):
    result, markdown, page = opacus_audit
    assert result.canary["relation"] == "add-remove"
    assert untrue_sentences(result, markdown, page) == []
    assert "S': the pair's other dataset, one record added or removed" in page  # the SVG's legend
    reasons = [c["reason"] for c in result.attack["portfolio"] if c["name"] == "canary-loss"]
    assert reasons and "record_score hook" in reasons[0]


def _untrue_after(original: tuple[Any, str, str], old: str, new: str, where: str = "markdown") -> list[str]:
    result, markdown, page = original
    if where == "markdown":
        assert old in markdown, old
        return untrue_sentences(result, markdown.replace(old, new, 1), page)
    assert old in page, old
    return untrue_sentences(result, markdown, page.replace(old, new))


def test_the_checker_names_each_sentence_made_untrue(audits):
    """Each sentence edited to what an older report said, or to a wrong figure: the checker objects."""
    positions, shuffled = audits["positions"], audits["shuffled"]
    every, early, user = audits["every look"], audits["stopped early"], audits["user function"]
    bound = f"{positions[0].empirical.epsilon_lower_bound:.3f}"
    assert _untrue_after(positions, f"at least {bound}", "at least 9.999")
    top = strongest_row(positions[0]).index
    assert _untrue_after(positions, f"at canary index {top}, the strongest position, ", "")  # the smallest claim,
    # without the position it is the smallest at (what the headline said before)
    assert _untrue_after(every, "every look taken, the last is look", "stopped early at look")
    assert _untrue_after(early, "stopped early at look", "every look taken, the last is look")
    assert "the smallest is claimed_epsilon (1.99)" in _headline(user[1])
    assert _untrue_after(user, "(1.99).", "(0.99).")
    assert _untrue_after(shuffled, "what poisson-as-reported gives", "what it gives")
    legend = neighbour_label(user[0])
    assert _untrue_after(user, legend, "S': canary replaced by its opposite" if "opposite" not in legend
                         else "S': without the canary record", "html")
    caption = re.search(r"<figcaption[^>]*>(.*?)</figcaption>", user[2], re.S).group(1)
    assert _untrue_after(user, caption, caption.rstrip(".") + " and the exact value.", "html")
    alone = re.search(r"<figcaption[^>]*>(.*?)</figcaption>", audits["tilt"][2], re.S).group(1)
    assert "no claim, ceiling or exact value is known" in alone  # a user's function without a claim: the dot alone
    assert _untrue_after(user, caption, alone, "html")  # said of a figure that draws a claim
    footnote = re.search(r"Failure probability [^<]*", positions[2]).group(0)
    assert _untrue_after(positions, footnote, re.sub(r"and [\d.e-]+ to each of", "and 0.1 to each of", footnote),
                         "html") if "odds ratio" in footnote else _untrue_after(
        positions, footnote, re.sub(r": [\d.e-]+ each", ": 0.1 each", footnote), "html")
    tilt = PLACEMENT_SENTENCES["tilt"]
    assert _untrue_after(audits["tilt"], f" {tilt}", "")  # the tilt placed the test: the note must say so
    assert _untrue_after(user, "named before any trial was drawn.", f"named before any trial was drawn. {tilt}")
    result, markdown, page = every
    histogram = next(c for c in re.findall(r"<figcaption[^>]*>(.*?)</figcaption>", page, re.S)
                     if "dashed line" in c)
    assert "hard to see" not in histogram  # bars of equal height on the certifying side, here
    assert _untrue_after(every, histogram, histogram + " So few of the trials of S land there that their bars are "
                                                       "hard to see beside those of S&#39;.", "html")


def test_the_checker_names_an_untrue_legend_and_reason_of_an_opacus_audit(opacus_audit):
    assert _untrue_after(opacus_audit, "S': the pair's other dataset, one record added or removed",
                         "S': canary replaced by its opposite", "html")
    result, markdown, page = opacus_audit
    portfolio = [dict(c) for c in result.attack["portfolio"]]
    for c in portfolio:
        if c["name"] == "canary-loss":
            c["reason"] = "score 'canary-loss' needs a mechanism that trains a model, 'opacus' does not"
    edited = result.to_dict()
    edited["attack"]["portfolio"] = portfolio
    assert untrue_sentences(edited, markdown, page)
