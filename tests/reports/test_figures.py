"""Figures that earn their place, the ceiling band in every report format, and tables without repeats."""

from __future__ import annotations

import copy
import dataclasses
import re

import pytest

from dpaudit.auditing.jobs.config import parse_config
from dpaudit.auditing.jobs.runner import RunOptions
from dpaudit.reports.captions import certifying_test, histogram_caption, profile_caption, roc_caption
from dpaudit.reports.plots import histograms, privacy_profile, roc
from dpaudit.reports.render import render
from dpaudit.reports.bands import band_sentences
from dpaudit.reports.formatting import md
from dpaudit.reports.tables import claims_rows, portfolio_rows
from dpaudit.reports.text import theory_slack_sentence
from tests.helpers import run_documents

ONE = {"title": "dp-sgd, last iterate, one canary position",
       "mechanism": {"name": "dp-sgd", "n": 20, "dim": 2, "batch_size": 2, "steps": 10, "eta": 0.5, "noise_std": 0.5,
                     "sampling": "poisson"},
       "canary": {"kind": "gradient", "pair": "zero"}, "audit": {"trials": 6000, "chunk_size": 3000}}
THREE = {"title": "projected kernel, three canary positions",
         "mechanism": {"name": "projected-kernel", "n": 8, "sigma": 0.5, "domain": "whole"},
         "canary": {"kind": "reset", "index": [1, 4, 8]}, "audit": {"trials": 4000, "chunk_size": 2000}}


@pytest.fixture(scope="module")
def documents(tmp_path_factory):
    store = tmp_path_factory.mktemp("figures") / "s.sqlite"
    configs = parse_config(ONE) + parse_config(THREE)
    one, three = run_documents(configs, RunOptions(store=str(store), workers=1, progress=False))
    return one, three


def _captions(page: str) -> list[str]:
    return [" ".join(text.split()) for text in re.findall(r"<figcaption[^>]*>(.*?)</figcaption>", page, re.S)]


def test_one_position_has_no_by_position_figure_but_its_band(documents):
    one, _ = documents
    assert one["per_index"][0]["ceiling_band"] is not None
    page = render(one, "html")
    assert "Epsilon by canary position" not in page
    assert "Certified bound against the ceiling band" in page
    assert page.count("<svg") == 4
    captions = _captions(page)
    assert len(captions) == 4 and all(len(c) > 40 for c in captions)  # one line each, saying what to look for


def test_several_positions_draw_the_by_position_figure_scaled_to_what_is_compared(documents):
    _, three = documents
    page = render(three, "html")
    assert "Epsilon by canary position" in page and "ceiling band (95% of ideal audits)" in page
    assert "Certified bound against the ceiling band" not in page
    svg = page[page.index("<svg"):page.index("</svg>")]
    assert "Epsilon by canary position" in svg and "tightest claim" in svg
    assert "(claim)" not in svg  # looser claims are not drawn (the claims table lists them all)
    assert len(_captions(page)) == 4


def test_band_in_every_format_and_a_bound_above_it_is_notable(documents):
    one, _ = documents
    row = one["per_index"][0]
    low, high = row["ceiling_band"]
    markdown = render(one, "md")
    assert "ceiling band (95%)" in markdown and f"{low:.3f} to {high:.3f}" in markdown
    assert "Ceiling band" in markdown and "Notable" not in markdown
    edited = copy.deepcopy(one)
    certified = row["empirical"]["epsilon_lower_bound"]
    assert certified > 0
    edited["per_index"][0]["ceiling_band"] = [certified / 4, certified / 2]
    assert "Notable: at canary index 20, the certified bound" in render(edited, "md")
    page = render(edited, "html")
    assert 'class="notable"' in page and "certified bound above it" in page


def test_a_score_that_does_not_apply_is_listed_once(documents):
    _, three = documents
    candidates = three["attack"]["portfolio"]
    skipped = {(c["name"], c["reason"]) for c in candidates if not c["applicable"]}
    assert skipped, "the auto portfolio of projected-kernel skips some scores"
    rows = portfolio_rows(three)
    for name, reason in skipped:
        listed = [r for r in rows if r[1] == name and r[2] == "no"]
        assert len(listed) == 1 and listed[0][0] == "every position" and listed[0][6] == reason
    applicable = [c for c in candidates if c["applicable"]]
    listed = [r for r in rows if r[2] == "yes"]
    distinct = {(c["index"], c["epsilon"], c["mu"]) for c in applicable}
    assert len(listed) == len(distinct) < len(applicable)  # one row per distinct test: ties are listed once
    for c in applicable:  # every score that applies is named in its test's row, the certifying one in the verdict
        row = next(r for r in listed if r[0] == str(c["index"]) and c["name"] in r[1].split(" = "))
        assert row[3] == f"{c['epsilon']:.4g}" or c["epsilon"] is None, (row, c)
        if c["chosen"]:
            assert row[5].startswith("certified") and (c["name"] in row[5] or " = " not in row[1])


def test_tests_that_differ_get_rows_of_their_own(documents):
    _, three = documents
    edited = copy.deepcopy(three)
    first = next(c for c in edited["attack"]["portfolio"] if c["applicable"] and not c["chosen"])
    first["epsilon"] = (first["epsilon"] or 0.0) + 0.5  # a score whose test differs from the others at its position
    rows = [r for r in portfolio_rows(edited) if r[2] == "yes"]
    assert [r for r in rows if r[1] == first["name"] and r[0] == str(first["index"])]
    assert len(rows) == len([r for r in portfolio_rows(three) if r[2] == "yes"]) + 1


def test_every_position_of_a_bound_against_its_band_is_explained(documents):
    _, three = documents
    rows = three["per_index"]
    below = [r["index"] for r in rows if r["empirical"]["epsilon_lower_bound"] < r["ceiling_band"][0]]
    inside = [r["index"] for r in rows if r["ceiling_band"][0] <= r["empirical"]["epsilon_lower_bound"]
              <= r["ceiling_band"][1]]
    assert below and inside, "the three positions of this audit give a bound below and one inside its band"
    sentences = band_sentences(three)
    for index in below:
        (sentence,) = [s for s in sentences if s.startswith(f"Below the band: at canary index {index}, ")]
        # the score ties with the exact likelihood ratio (a one-dimensional output): the gap is the threshold's
        assert "gave the same test as the exact likelihood ratio" in sentence and "400 calibration trials" in sentence
    without_exact = copy.deepcopy(three)
    without_exact["attack"]["portfolio"] = [c for c in three["attack"]["portfolio"] if c["name"] != "exact"]
    assert all("may not be the likelihood ratio" in s for s in band_sentences(without_exact) if s.startswith("Below"))
    (together,) = [s for s in sentences if s.startswith("Inside the band: ")]  # one sentence for them all
    word = "index" if len(inside) == 1 else "indices"
    assert together.startswith(f"Inside the band: at canary {word} {', '.join(map(str, inside))}, ")
    markdown, page = render(three, "md"), render(three, "html")
    for sentence in sentences:
        assert md(sentence) in markdown and sentence.replace("'", "&#39;") in page
    assert markdown.count("(certified bound below it)") == len(below)
    assert 'class="band"' in page and "this audit&#39;s test was weaker than the ideal one" in page  # reading guide
    edited = copy.deepcopy(three)
    for row in edited["per_index"]:  # every bound above its band: notable, and neither below nor inside
        certified = row["empirical"]["epsilon_lower_bound"]
        row["ceiling_band"], row["ceiling"] = [certified / 4, certified / 2], certified / 3
    assert not [s for s in band_sentences(edited) if s.startswith(("Below", "Inside"))]
    assert "Notable: at canary index 1" in render(edited, "md")


def test_a_lopsided_band_says_why(documents):
    one, three = documents
    lopsided = [r for r in three["per_index"]
                if r["ceiling"] - r["ceiling_band"][0] > 3 * (r["ceiling_band"][1] - r["ceiling"])]
    assert lopsided, "position 8's band reaches far further below its ceiling than above"
    sentences = [s for s in band_sentences(three) if s.startswith("Lopsided band")]
    assert len(sentences) == len(lopsided)
    for row, sentence in zip(lopsided, sentences):
        assert f"at canary index {row['index']}," in sentence and "cannot fall below zero" in sentence
        assert f"{row['ceiling'] - row['ceiling_band'][0]:.3g} below it" in sentence
    edited = copy.deepcopy(one)
    row = edited["per_index"][0]
    row["ceiling_band"] = [row["ceiling"] - 0.05, row["ceiling"] + 0.5]  # the other way round
    (sentence,) = [s for s in band_sentences(edited) if s.startswith("Lopsided band")]
    assert "0.5 above the central ceiling" in sentence and "fewer than expected lift the bound" in sentence
    row["ceiling_band"] = [row["ceiling"] - 0.3, row["ceiling"] + 0.2]  # not lopsided: nothing to explain
    assert not [s for s in band_sentences(edited) if s.startswith("Lopsided band")]


def test_captions_say_where_this_audits_test_sits(documents):
    for document in documents:
        record = next(r for r in document["per_index"]
                      if r["index"] == document["empirical"]["index"])["empirical"]["epsilon"]
        place = certifying_test(document)
        assert place["fpr"] == record["false_positive_rate_upper"]
        assert place["fnr"] == record["false_negative_rate_upper"]
        threshold = f"{place['threshold']:.4g}"
        roc, histogram = roc_caption(document), histogram_caption(document)
        assert threshold in roc and threshold in histogram
        assert f"at most {place['fpr']:.3g} of those of S" in roc
        assert f"in the direction {record['direction'].replace('-', ' - ').replace('/', ' / ')}" in roc
        far = record["direction"] == "log((1-delta-FPR)/FNR)"
        assert place["far"] == far
        # the certifying side of the threshold: where the test does not fire (far) or fires
        assert ("below it" if far == (record["orientation"] == "larger under S'") else "above it") in histogram
        captions = _captions(render(document, "html"))
        assert roc.replace("'", "&#39;") in captions and histogram.replace("'", "&#39;") in captions
    one, _ = documents
    edited = copy.deepcopy(one)
    record = edited["per_index"][0]["empirical"]["epsilon"]
    record["direction"], record["false_positive_rate_upper"] = "log((1-delta-FNR)/FPR)", 0.002
    assert "log((1 - delta - FNR) / FPR), from its false-positive rate" in roc_caption(edited)
    assert "above it: at least" in histogram_caption(edited)
    # "hard to see" is said of the bars drawn: not while S's bars above the threshold stand as tall as S''s ...
    histogram = edited["per_index"][0]["distributions"]["histogram"]
    centres = [(low + high) / 2 for low, high in zip(histogram["edges"][:-1], histogram["edges"][1:])]
    above = [centre >= certifying_test(edited)["threshold"] for centre in centres]
    histogram["a"] = [max(histogram["b"])] * len(centres)
    assert "hard to see" not in histogram_caption(edited)
    # ... and said once they are under THIN of the tallest bar of S' there
    histogram["a"] = [0 if kept else count for kept, count in zip(above, histogram["a"])]
    assert "hard to see" in histogram_caption(edited)
    del record["threshold"]  # a record that does not say where its test sits: a caption that claims nothing
    assert "this audit" not in roc_caption(edited).lower() and "threshold (" not in histogram_caption(edited)


def test_the_profile_marks_the_certified_point_and_the_histogram_the_threshold(documents):
    for document in documents:
        certified = document["empirical"]["epsilon_lower_bound"]
        profile = privacy_profile(document)
        assert f"certified: epsilon &gt;= {certified:.3f} at delta = {document['empirical']['delta']:g}" in profile
        assert "this audit&#39;s threshold" in histograms(document) or "this audit's threshold" in histograms(document)
        assert "this audit&#39;s test" in roc(document) or "this audit's test" in roc(document)
        caption = profile_caption(document)
        assert caption.startswith(f"The star is the headline, epsilon >= {certified:.3f} certified")
        assert caption.replace("'", "&#39;").replace(">", "&gt;") in _captions(render(document, "html"))
    edited = copy.deepcopy(documents[0])
    for row in edited["per_index"]:
        row["empirical"]["epsilon_lower_bound"] = 0.0
    edited["empirical"]["epsilon_lower_bound"] = 0.0
    assert "certified: epsilon" not in privacy_profile(edited)  # nothing certified: no point to mark
    assert "star" not in profile_caption(edited)  # ... and a caption that names none


def test_theory_slack_never_says_one_times(documents):
    one, three = documents
    sentence = theory_slack_sentence(three)
    assert three["theory_slack"]["tightest_over_exact"] == pytest.approx(1, abs=5e-4)
    assert "equals the exact value of this instance" in sentence and "1 times" not in sentence
    assert "1 times" not in render(three, "md") and "1 times" not in render(three, "html")
    ratio = one["theory_slack"]["tightest_over_exact"]
    assert f"it is {ratio:.3g} times the exact value" in theory_slack_sentence(one)


def test_a_reference_is_listed_as_one_with_its_value_and_never_as_applicable():
    from dpaudit.mechanisms.accounting.entry import REFERENCE_KINDS, ClaimEntry

    reference = ClaimEntry(name="last-iterate-surrogate", citation="docs/theory.md 6", relation="add-remove",
                           kind="reference", applicable=False, reason=REFERENCE_KINDS["reference"], index=None,
                           epsilon=0.958, delta=1e-5)
    unmet = dataclasses.replace(reference, name="bounded-domain-rdp", kind="upper-bound", epsilon=None,
                                reason="K is unbounded (domain='whole')")
    bound = dataclasses.replace(reference, name="sgm-pld", kind="upper-bound", applicable=True, reason="",
                                epsilon=1.243)
    rows = {row[0]: row for row in claims_rows([reference, unmet, bound], {}, 0.5)}
    assert rows["last-iterate-surrogate"][3:6] == ["no (reference)", "0.958", ""]  # its value, no tightness
    assert rows["last-iterate-surrogate"][7] == "a reference, not a bound; docs/theory.md 6"
    assert rows["bounded-domain-rdp"][3:5] == ["no", "n/a"]
    assert rows["bounded-domain-rdp"][7] == "not applicable: K is unbounded (domain='whole')"
    assert rows["sgm-pld"][3:6] == ["yes", "1.243", f"{0.5 / 1.243:.3g}"]


def test_log_axes_are_labelled_at_their_decades_in_plain_text(documents):
    """The ROC and profile label powers of ten as text (``10⁻⁶``), not mathtext, and nothing between them."""
    from dpaudit.reports.plots import _decade

    assert [_decade(v) for v in (1e-6, 1e-1, 1.0, 10.0, 2e-3, 0.0)] == ["10⁻⁶", "10⁻¹", "1", "10¹", "", ""]
    for svg in (roc(documents[0]), privacy_profile(documents[0])):
        assert "10⁻⁶" in svg or "10⁻⁸" in svg
        assert "mathdefault" not in svg and "$" not in svg
