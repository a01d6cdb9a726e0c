"""``dpaudit zoo`` and ``dpaudit gallery`` show progress on stderr when asked (``--progress``) and none with
``--quiet``; the zoo's tables explain every symbol they show."""

from __future__ import annotations

import json

import pytest

import dpaudit.gallery
from dpaudit.auditing.checks.zoo.runner import ZooResult
from dpaudit.auditing.checks.zoo.statuses import FAILURES, MEANINGS, status_legend
from dpaudit.cli import main
from dpaudit.commands.zoo import UNKNOWN

#: Two cheap variants whose table shows ``passed``, ``beyond-reach`` and an unknown true epsilon.
CHEAP = ["--only", "shuffle-does-not-shuffle:correct", "gaussian-classical-sigma-eps-gt-1", "--trials", "2000"]


def test_forced_progress_names_each_case_on_stderr_and_leaves_stdout_alone(capsys):
    assert main(["zoo", *CHEAP, "--json", "--progress"]) == 0
    captured = capsys.readouterr()
    names = [row["name"] for row in json.loads(captured.out)["variants"]]  # stdout: one JSON document still
    assert len(names) == 3
    assert all(name in captured.err for name in names) and "3/3" in captured.err
    assert main(["zoo", *CHEAP, "--quiet"]) == 0
    assert capsys.readouterr().err == ""
    assert main(["zoo", "--progress", "--quiet"]) == 2  # one or the other
    assert "not allowed with" in capsys.readouterr().err


def test_the_table_explains_every_symbol_it_shows(capsys):
    assert main(["zoo", *CHEAP, "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = [line.split() for line in out[1:4]]
    statuses = {row[2] for row in rows}
    assert statuses == {"passed", "beyond-reach"}
    legend = "\n".join(out[4:])
    for status in statuses:
        assert f"{status} = {MEANINGS[status]}" in legend
    assert "caught =" not in legend  # only the symbols the table shows
    assert any(row[5] == UNKNOWN for row in rows) and f"true: {UNKNOWN} = not known" in legend


def test_every_status_a_zoo_result_takes_has_a_meaning():
    def result(buggy: bool, caught: bool, true: float | None, ceiling: float | None = None) -> str:
        return ZooResult("v", buggy, caught, 0.0, 1.0, true, 0.0, 100, 0.0, "", ceiling).status

    shown = {result(True, True, 2.0), result(True, False, 2.0), result(True, False, 0.5),
             result(True, False, 2.0, ceiling=0.8), result(False, False, 1.0), result(False, True, 1.0)}
    assert shown <= set(MEANINGS) and len(shown) == 6
    assert set(FAILURES) <= shown
    assert status_legend([]) == "" and status_legend(MEANINGS).count(" = ") == len(MEANINGS)


@pytest.mark.parametrize(("flags", "shown"), [(["--progress"], True), (["--quiet"], False), ([], False)])
def test_gallery_progress_is_forced_on_or_off(tmp_path, monkeypatch, flags, shown):
    # stderr is no terminal under pytest: the bars show only when --progress forces them (build is replaced:
    # this checks what the command asks of it)
    asked = {}

    def build(out, **options):
        asked.update(options)
        return out / "index.html"

    monkeypatch.setattr(dpaudit.gallery, "build", build)
    assert main(["gallery", "--out", str(tmp_path), *flags]) == 0
    assert asked["progress"] is shown
