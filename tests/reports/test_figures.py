"""Figures that earn their place, the ceiling band in every report format, and tables without repeats."""

from __future__ import annotations

import copy
import re

import pytest

from dpaudit.auditing.jobs.config import parse_config
from dpaudit.auditing.jobs.runner import RunOptions
from dpaudit.reports.render import render
from dpaudit.reports.text import portfolio_rows
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

