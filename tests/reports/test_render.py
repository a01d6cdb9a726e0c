"""Reports in every format: parseable, self-contained, escaped, and rendered by a real browser."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from html.parser import HTMLParser

import numpy as np
import pytest

from dpaudit.auditing.jobs.config import parse_config
from dpaudit.auditing.jobs.runner import RunOptions
from dpaudit.cli import main
from dpaudit.reports.render import render
from tests.helpers import run_documents

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
    # inert without HTML entities: a backslash makes "<" a literal character (CommonMark 2.4)
    assert not re.search(r"(?<!\\)<script", text) and "\\<script>" in text and "&gt;" not in text
    assert "&lt;" not in text and "&amp;" not in text and " >= " in text  # the verdict's "epsilon >= ..." as written
    assert "Verdict: consistent" in text and "| pabi-shift-reduction |" in text
    parsed = json.loads(render(document, "json"))
    assert parsed["schema_version"] == 3 and parsed["title"] == INJECTED
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


HOSTILE = [
    "<script>alert(1)</script>",
    "\"><img src=x onerror=alert(1)>",
    "[click](javascript:alert(1))",
    "![pixel](http://evil.example/p.png)",
    "ok\n# Injected heading\n[ref]: javascript:alert(1)",
    "x\r\n<iframe src=//evil>\u2028## also",
    "`code` | a | b | **bold** _em_ ~~s~~ $\\frac{a}{b}$ _hidden",
    "&lt;script&gt; &amp; <!-- comment -->",
    "\x1b]0;terminal title\x07\x1b[31mred",
]


def _hostile(value, text):
    """``value`` with every string leaf (not the keys) replaced by ``text``."""
    if isinstance(value, dict):
        return {key: _hostile(item, text) for key, item in value.items()}
    if isinstance(value, list):
        return [_hostile(item, text) for item in value]
    return text if isinstance(value, str) else value


def _markdown_structure(text):
    return [line for line in text.splitlines() if line.startswith("#")]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_strings_in_every_string_field_stay_inert(document, text, tmp_path, capsys):
    crafted = _hostile(document, text)
    benign_headings = len(_markdown_structure(render(document, "md")))
    md = render(crafted, "md")
    assert len(_markdown_structure(md)) == benign_headings  # no injected heading (titles are our headings)
    for line in _markdown_structure(md)[1:]:
        assert "Injected" not in line and "also" not in line
    lowered = md.lower()
    for live in ("<script", "<img", "<iframe", "<!--"):
        assert not re.search(r"(?<!\\)" + re.escape(live), lowered), live  # only as "\<" (a literal "<")
    assert not re.search(r"(?<!\\)&(?:#|[a-z0-9]+;)", lowered)  # no entity is read either

    assert not re.search(r"(?<!\\)\[", md)  # every bracket from a result is escaped: no link or image
    assert not re.search(r"(?<!\\)\]\(", md)
    assert not re.search(r"^\s*\\?\[ref\\?\]:", md, re.M)
    html_text = render(crafted, "html")
    collector = _Collector()
    collector.feed(html_text)
    assert not {"script", "img", "iframe"} & set(collector.tags)
    assert not [name for name, _ in collector.attributes if name.lower().startswith("on")]
    assert not [value for name, value in collector.attributes if name in ("href", "src") and value]
    # the same through the command line, from a hand-edited JSON file
    crafted_file = tmp_path / "crafted.json"
    crafted_file.write_text(json.dumps(crafted))
    out = tmp_path / "out.md"
    assert main(["report", str(crafted_file), "--format", "md", "--out", str(out)]) == 0
    assert out.read_text() == md
    assert "\x1b" not in capsys.readouterr().err


WRITER = """
import json, sys
from pathlib import Path
from dpaudit.reports.render import write_all, write_text_atomic
document = json.loads(Path(sys.argv[1]).read_text())
big = Path(sys.argv[2]).read_text()
out = Path(sys.argv[3])
print("ready", flush=True)
while True:
    write_all(document, out)
    write_text_atomic(out / "big.md", big)
"""


def test_killed_report_writing_never_leaves_a_truncated_file(document, tmp_path):
    import random
    import signal
    import sys

    source = tmp_path / "document.json"
    source.write_text(json.dumps(document))
    big = "".join(f"line {k} of a long report\n" for k in range(600_000))  # about 15 MB: slow enough to hit
    (tmp_path / "big.txt").write_text(big)
    out = tmp_path / "out"
    out.mkdir()
    expected = {f"{document['audit_id']}.{fmt}": render(document, fmt) for fmt in ("json", "md", "html")}
    expected["big.md"] = big
    rng = random.Random(11)
    seen = 0
    for _ in range(6):
        child = subprocess.Popen([sys.executable, "-c", WRITER, str(source), str(tmp_path / "big.txt"), str(out)],
                                 stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.0, 1.0))
        child.send_signal(signal.SIGKILL)
        child.wait()
        for path in out.iterdir():
            if path.name.startswith("."):  # an unfinished temporary file: never under a final name
                assert path.name.endswith(".tmp")
                continue
            assert path.read_text() == expected[path.name], path.name
            seen += 1
    assert seen >= 6  # the kills came after some files were complete


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002])
def test_reports_are_written_with_the_users_umask(document, tmp_path, mask):
    """A report is readable like any other file the user writes (0o666 less the umask), not a private 0o600."""
    from dpaudit.reports.render import write_all

    source = tmp_path / "result.json"
    source.write_text(json.dumps(document))
    previous = os.umask(mask)
    try:
        paths = write_all(document, tmp_path)
        assert main(["report", str(source), "--format", "md", "--out", str(tmp_path / "again.md")]) == 0
    finally:
        os.umask(previous)
    for path in [*paths, tmp_path / "again.md"]:
        assert path.stat().st_mode & 0o777 == 0o666 & ~mask, (path.name, oct(path.stat().st_mode))
