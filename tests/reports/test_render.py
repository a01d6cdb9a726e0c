"""Reports in every format: parseable, self-contained, escaped, and rendered by a real browser."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from html.parser import HTMLParser

import numpy as np
import pytest

from dpaudit.cli import main
from dpaudit.audit.config import parse_config
from dpaudit.audit.runner import RunOptions
from tests.helpers import run_documents
from dpaudit.reports.render import render

INJECTED = "<script>alert('x')</script> & friends"


@pytest.fixture(scope="module")
def document(tmp_path_factory):
    raw = {"title": INJECTED,
           "mechanism": {"name": "projected-kernel", "n": 8, "sigma": 0.5, "domain": "whole"},
           "canary": {"kind": "reset", "index": [1, 4, 8]}, "audit": {"trials": 4000, "chunk_size": 2000}}
    store = tmp_path_factory.mktemp("store") / "r.sqlite"
    return run_documents(parse_config(raw), RunOptions(store=str(store), workers=1, progress=False))[0]


class _Collector(HTMLParser):
    VOID = {"meta", "br", "img", "input", "link", "hr", "col", "path", "rect", "use", "stop", "circle", "line",
            "polyline", "polygon", "ellipse"}

    def __init__(self) -> None:
        super().__init__()
        self.stack, self.tags, self.attributes, self.text = [], [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attributes.extend(attrs)
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)
        self.attributes.extend(attrs)

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        assert self.stack and self.stack[-1] == tag, f"unbalanced </{tag}> after {self.stack[-3:]}"
        self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def test_html_parses_has_svg_figures_and_nothing_external(document):
    page = render(document, "html")
    parser = _Collector()
    parser.feed(page)
    parser.close()
    assert parser.stack == []
    assert parser.tags.count("svg") == 4
    assert "script" not in parser.tags  # the injected title did not become a tag
    assert INJECTED in "".join(parser.text)  # ... it is shown as text
    for name, value in parser.attributes:
        if name in ("src", "href", "xlink:href", "action", "data"):
            assert not str(value).startswith(("http:", "https:", "//")), (name, value)
    assert "@import" not in page and "url(http" not in page


def test_markdown_and_json(document):
    text = render(document, "md")
    assert "<script>" not in text and "&lt;script&gt;" in text
    assert "Verdict: consistent" in text and "| pabi-shift-reduction |" in text
    parsed = json.loads(render(document, "json"))
    assert parsed["schema_version"] == 2 and parsed["title"] == INJECTED
    with pytest.raises(ValueError, match="format must be one of"):
        render(document, "pdf")


def test_report_command_rerenders_from_file_and_store(document, tmp_path):
    result = tmp_path / "result.json"
    result.write_text(json.dumps(document))
    for fmt in ("html", "md", "json"):
        out = tmp_path / f"report.{fmt}"
        assert main(["report", str(result), "--format", fmt, "--out", str(out)]) == 0
        assert out.stat().st_size > 500
    out = tmp_path / "by_id.md"
    assert main(["report", document["audit_id"], "--store", document["store"], "--format", "md",
                 "--out", str(out)]) == 0
    assert main(["report", "nope", "--store", document["store"], "--format", "md", "--out", str(out)]) == 2


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_html_renders_in_headless_chromium(document, tmp_path):
    browser = _chromium()
    if browser is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing on CI: .ci/run installs Debian's chromium")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    page = tmp_path / "report.html"
    page.write_text(render(document, "html"))
    picture = tmp_path / "report.png"
    result = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1200,2400",
         f"--screenshot={picture}", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    from matplotlib.image import imread

    pixels = imread(picture)
    assert pixels.shape[0] >= 1000 and pixels.shape[1] >= 1000
    grey = pixels[..., :3].mean(axis=2)
    assert grey.std() > 0.05  # not blank: text and figures give contrast
    assert (grey < 0.5).mean() > 0.005  # dark ink (text, axes, curves) covers part of the page
    np.testing.assert_array_less(0.5, grey.mean())  # a light page, as designed


def test_model_based_numbers_stay_labelled(document):
    from dpaudit.reports.text import gdp_sentence, verdict_sentence

    sentence = verdict_sentence(document)
    assert "mu" not in sentence and "model" not in sentence  # the verdict states only what was certified
    gdp = gdp_sentence(document)
    assert "model-based (assumes a Gaussian tradeoff)" in gdp and "not a certified bound" in gdp
    for fmt in ("md", "html"):
        text = render(document, fmt)
        assert "model-based (assumes a Gaussian tradeoff)" in text
        if document["empirical"]["model_based_epsilon"] is not None:
            model = f"{document['empirical']['model_based_epsilon']:.3f}"
            line = next(line for line in text.splitlines() if model in line)
            assert "model-based" in line  # never shown without its label
