"""``dpaudit gallery`` builds a reduced gallery in which every section holds audits."""

from __future__ import annotations

import re

from dpaudit.cli import main
from dpaudit.gallery import SECTIONS, section_configs


def test_reduced_gallery_has_audits_in_every_section(tmp_path, capsys):
    assert all(section_configs(section) for section in SECTIONS), "a section ships no config"
    out = tmp_path / "gallery"
    # one worker here: under pytest-xdist a gallery's own worker processes ended the test worker (node down); the
    # default workers are tested on the library section, the one whose objects need building in the worker
    # (tests/package/test_gallery_libraries.py)
    assert main(["gallery", "--out", str(out), "--trials", "2000", "--workers", "1",
                 "--store", str(tmp_path / "g.sqlite"), "--quiet"]) == 0
    assert f"wrote {out / 'index.html'}" in capsys.readouterr().err
    page = (out / "index.html").read_text(encoding="utf-8")
    sections = re.findall(r'<section class="gallery-section" id="(\w+)">(.*?)</section>', page, re.S)
    assert [folder for folder, _ in sections] == [section.folder for section in SECTIONS]
    for folder, body in sections:
        audits = re.findall(r'<a href="(\w+)\.html">full report</a>', body)
        assert len(audits) == len(section_configs(next(s for s in SECTIONS if s.folder == folder))), folder
        for audit_id in audits:  # each audit links to its own report, written beside the page
            assert (out / f"{audit_id}.html").is_file() and (out / f"{audit_id}.json").is_file()
        assert "<svg" in body
