"""The HTML report as a browser builds it: a one-index and a five-index report, checked in Chromium's DOM."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from dpaudit.auditing.jobs.config import parse_config
from dpaudit.auditing.jobs.runner import RunOptions
from dpaudit.reports.render import render
from tests.helpers import run_documents

ONE = {"title": "pnsgd, one canary position",
       "mechanism": {"name": "pnsgd", "n": 10, "dim": 2, "eta": 0.2, "sigma": 0.8, "domain": "ball"},
       "canary": {"kind": "gradient", "index": 10}, "audit": {"trials": 6000, "chunk_size": 3000}}
FIVE = {"title": "projected kernel, five canary positions",
        "mechanism": {"name": "projected-kernel", "n": 10, "sigma": 0.6, "domain": "whole"},
        "canary": {"kind": "reset", "index": [1, 3, 5, 8, 10]}, "audit": {"trials": 6000, "chunk_size": 3000}}
#: parameters that do not apply to each configuration and must not be shown
HIDDEN = {"one": ("low=", "high=", "scale=", "smoothness="), "five": ("radius=", "low=", "high=", "scale=",
                                                                      "contraction=")}
BROWSER_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _chromium() -> str:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing on CI: .ci/run installs Debian's chromium")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return browser


class _Dom(HTMLParser):
    """Text by element id and the cells of the by-index table, from Chromium's serialised DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.open_ids: list[tuple[str, str]] = []
        self.text_by_id: dict[str, str] = {}
        self.columns: list[str] = []
        self.rows: list[dict[str, str]] = []
        self._cell: str | None = None
        self.svg_text: list[str] = []
        self._in_svg_text = False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if "id" in attributes:
            self.open_ids.append((tag, attributes["id"]))
            self.text_by_id.setdefault(attributes["id"], "")
        if any(element == "by-index" for _, element in self.open_ids):
            if tag == "th":
                self.columns.append(attributes.get("data-column", ""))
            elif tag == "tr":
                self.rows.append({})
            elif tag == "td":
                self._cell = attributes.get("data-column")
                self.rows[-1][self._cell] = ""
        self._in_svg_text = tag == "text"

    def handle_endtag(self, tag):
        if self.open_ids and self.open_ids[-1][0] == tag:
            self.open_ids.pop()
        if tag == "td":
            self._cell = None
        if tag == "text":
            self._in_svg_text = False

    def handle_data(self, data):
        for _, element in self.open_ids:
            self.text_by_id[element] += data
        if self._cell is not None:
            self.rows[-1][self._cell] += data
        if self._in_svg_text:
            self.svg_text.append(data)


@pytest.fixture(scope="module", params=["one", "five"])
def report(request, tmp_path_factory):
    raw = ONE if request.param == "one" else FIVE
    directory = tmp_path_factory.mktemp(request.param)
    document = run_documents(parse_config(raw), RunOptions(store=str(directory / "s.sqlite"), workers=1,
                                                         progress=False))[0]
    page = directory / "report.html"
    page.write_text(render(document, "html"))
    return request.param, document, page


def _dump_dom(page: Path, profile: Path) -> str:
    result = subprocess.run([_chromium(), *BROWSER_FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def test_report_dom_in_chromium(report, tmp_path):
    name, document, page = report
    dom = _Dom()
    dom.feed(_dump_dom(page, tmp_path / "profile"))
    verdict = " ".join(dom.text_by_id["verdict"].split())
    assert f"Verdict: {document['verdict']}." in verdict
    assert re.search(r"Certified with confidence 0\.95\b", verdict)
    assert "epsilon is at least" in verdict and "mu" not in verdict
    model = " ".join(dom.text_by_id["model-based"].split())
    assert model.startswith("Model-based GDP fit: mu >=") and "model-based (assumes a Gaussian tradeoff)" in model
    guide = dom.text_by_id["reading-guide"]
    for term in ("Certified lower bound", "Claims", "Exact value", "Statistical ceiling", "Tightness"):
        assert term in guide
    assert ("Per-index confidence" in guide) == (name == "five")
    assert {"index", "claim", "claim_epsilon", "tightness", "exact", "ceiling", "verdict"} <= set(dom.columns)
    body = [row for row in dom.rows if row]
    expected = [str(i) for i in ([10] if name == "one" else [1, 3, 5, 8, 10])]
    assert [row["index"] for row in body] == expected
    for row in body:
        assert row["claim"] and row["claim"] != "none applicable"
        assert re.fullmatch(r"\d+(\.\d+)?(e-?\d+)?", row["tightness"]), row
    assert any("AUC" in text for text in dom.svg_text)
    assert any(re.search(r"TPR [\d.]+ at FPR 0\.001", text) for text in dom.svg_text)
    parameters = dom.text_by_id["parameters"]
    assert "sigma=" in parameters
    for hidden in HIDDEN[name]:
        assert hidden not in parameters, (hidden, parameters)
    assert "None" not in parameters


def test_report_screenshots(report, tmp_path):
    """Screenshots of both reports (kept under /tmp/dpaudit-screenshots when DPAUDIT_SCREENSHOTS is set)."""
    name, _, page = report
    picture = tmp_path / f"{name}.png"
    result = subprocess.run([_chromium(), *BROWSER_FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                             "--window-size=1200,3200", f"--screenshot={picture}", page.as_uri()],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    from matplotlib.image import imread

    grey = imread(picture)[..., :3].mean(axis=2)
    assert grey.shape == (3200, 1200) and grey.std() > 0.05
    keep = os.environ.get("DPAUDIT_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(picture, Path(keep) / picture.name)
