"""What a user installs: one top-level package, working next to PyPI's ``reports``; docs that ship."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMALL = """
[mechanism]
name = "gaussian"
sigma = 2.0
[audit]
trials = 2000
"""


def _tracked_files() -> list[str]:
    result = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        pytest.skip("not a git checkout")
    return result.stdout.splitlines()


def test_wheel_has_one_top_level_package(tmp_path):
    source = tmp_path / "source"
    for name in _tracked_files():  # build from what is committed, away from the work tree
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, target)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"),
                    str(source)], check=True, capture_output=True)
    wheel = next((tmp_path / "dist").glob("dpaudit-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert {top for top in tops if not top.endswith(".dist-info")} == {"dpaudit"}
    for expected in ("dpaudit/py.typed", "dpaudit/mechanisms/base.py", "dpaudit/attacks/canaries.py",
                     "dpaudit/auditing/jobs/runner.py", "dpaudit/core/errors.py",
                     "dpaudit/reports/templates/report.html.j2", "dpaudit/mechanisms/accounting/builders/sgd.py",
                     "dpaudit/auditing/checks/zoo/broken.py",
                     "dpaudit/commands/run.py", "dpaudit/gallery/per_index/kernel_reset.toml"):
        assert expected in names, expected
    # every source folder with an __init__.py ships as a subpackage (audit/ as dpaudit/auditing/)
    installed = {"mechanisms": "mechanisms", "attacks": "attacks", "audit": "auditing", "reports": "reports"}
    for init in ROOT.glob("*/**/__init__.py"):
        folder = init.parent.relative_to(ROOT)
        if folder.parts[0] in installed:
            path = "/".join((installed[folder.parts[0]], *folder.parts[1:]))
            assert f"dpaudit/{path}/__init__.py" in names, folder
    assert any(name.endswith("licenses/LICENSE") for name in names)


def test_commands_work_beside_a_foreign_top_level_reports_package(tmp_path):
    """PyPI has an unrelated ``reports``; with it importable first, dpaudit must not notice."""
    stand_in = tmp_path / "reports"
    stand_in.mkdir()
    (stand_in / "__init__.py").write_text("raise ImportError('this is not dpaudit')\n")
    (stand_in / "render.py").write_text("raise ImportError('this is not dpaudit')\n")
    config = tmp_path / "small.toml"
    config.write_text(SMALL)
    result = subprocess.run(
        [sys.executable, "-m", "dpaudit", "run", str(config), "--store", str(tmp_path / "s.sqlite"),
         "--out", str(tmp_path / "out"), "--workers", "1", "--quiet"],
        cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert sorted(p.suffix for p in (tmp_path / "out").iterdir()) == [".html", ".json", ".md"]


def test_version_flag_and_module_entry_point():
    from dpaudit import __version__

    result = subprocess.run([sys.executable, "-m", "dpaudit", "--version"], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout.strip() == f"dpaudit {__version__}"


CITATION = re.compile(r"\b((?:docs/)?[A-Za-z_]+\.md)\b")


def test_every_cited_document_ships():
    """Every ``*.md`` file named in code, templates or reports exists in the repository."""
    cited: dict[str, list[str]] = {}
    for folder in ("mechanisms", "attacks", "audit", "reports", "dpaudit"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".j2", ".toml"):
                for name in CITATION.findall(path.read_text(encoding="utf-8")):
                    cited.setdefault(name, []).append(str(path.relative_to(ROOT)))
    missing = {name: places for name, places in cited.items() if not (ROOT / name).is_file()}
    assert cited, "the scan found no citation at all"
    assert missing == {}
    tracked = set(_tracked_files())
    assert all(name in tracked for name in cited), "cited documents must be committed"


# Runs each script given, in order, as ``python script`` would (``__name__ == "__main__"``, a namespace of its own),
# in one interpreter: the blocks share the start-up and imports (about 2.5 s a block), nothing else.
_BLOCKS_DRIVER = """
import runpy, sys
for path in sys.argv[1:]:
    print(f"== running {path}", flush=True)
    runpy.run_path(path, run_name="__main__")
"""


@pytest.mark.parametrize("document", ["README.md", "docs/guide.md"])
def test_python_blocks_of_the_docs_run_as_written(tmp_path, document):
    """Every Python block runs as a script (all of a document's scripts in one interpreter, each in a namespace of
    its own, in order); a block that defines pytest tests runs under pytest, and its tests must be collected and
    pass."""
    text = (ROOT / document).read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks, f"{document} has no Python block"
    scripts = []
    for number, block in enumerate(blocks):
        script = tmp_path / f"test_block{number}.py"
        script.write_text(block)
        tests = re.findall(r"^def (test_\w+)\(", block, re.M)
        if not tests:
            scripts.append(script)
            continue
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", str(script)]
        result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True)
        assert result.returncode == 0, f"{document} Python block {number} failed:\n{block}\n{result.stdout}" \
                                       f"\n{result.stderr}"
        assert f"{len(tests)} passed" in result.stdout, result.stdout
    result = subprocess.run([sys.executable, "-c", _BLOCKS_DRIVER, *map(str, scripts)], cwd=tmp_path,
                            capture_output=True, text=True)
    started = re.findall(r"^== running .*test_block(\d+)\.py$", result.stdout, re.M)
    failed = f"{document} Python block {started[-1] if started else '?'} failed:\n{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, failed
    assert len(started) == len(scripts), failed
    # what the text says a block prints, it prints: "This prints `consistent 0.231`" after a block
    printed = dict(zip((int(n) for n in started), re.split(r"^== running .*$\n?", result.stdout, flags=re.M)[1:]))
    quoted = _quoted_prints(text)
    for number, expected in quoted.items():
        assert number in printed, f"{document} block {number} is said to print {expected!r} but runs under pytest"
        assert _same_print(printed[number], expected), (f"{document} Python block {number} prints "
                                                       f"{printed[number].strip()!r}; the text says {expected!r}")


def _quoted_prints(text: str) -> dict[int, str]:
    """``{block number: what the text right after it says it prints}``, from "prints `...`" in the paragraph
    that follows a Python block."""
    parts = re.split(r"```python\n.*?```", text, flags=re.S)
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    quoted = {}
    for number, (block, after) in enumerate(zip(blocks, parts[1:])):
        paragraph = after.strip().split("\n\n", 1)[0]
        found = re.search(r"\bprints `([^`]+)`", paragraph)
        comment = re.search(r"# prints: (.+?)(?:: |$)", block, re.M)  # "# prints: violation 8.807" in the block
        if found or comment:
            quoted[number] = (found or comment).group(1).strip()
    return quoted


#: The tolerance of a quoted figure: 2% of it, or 2 units of its last digit, whichever is larger (the blocks are
#: seeded; what moves the figures is a library release, not chance)
RELATIVE, LAST_DIGITS = 0.02, 2


def _same_print(printed: str, expected: str) -> bool:
    """Whether a line ``printed`` reads as ``expected``: the same words, each number within the tolerance."""
    return any(_same_line(line.split(), expected.split()) for line in printed.splitlines())


def _same_line(words: list[str], wanted: list[str]) -> bool:
    if len(words) != len(wanted):
        return False
    for word, want in zip(words, wanted):
        bare, target_text = word.strip("[](),"), want.strip("[](),")
        try:
            value, target = float(bare), float(target_text)
        except ValueError:
            if word != want:
                return False
            continue
        if word.replace(bare, "") != want.replace(target_text, ""):  # the same brackets and commas around it
            return False
        decimals = len(target_text.split(".")[1]) if "." in target_text else 0
        if abs(value - target) > max(RELATIVE * abs(target), LAST_DIGITS * 10 ** -decimals):
            return False
    return True


def test_quoted_prints_are_read_and_compared_with_their_tolerance():
    text = "```python\nprint(1)\n```\n\nThis prints `consistent 0.231`, as it should.\n\n```python\nx\n```\n\nNo.\n"
    assert _quoted_prints(text) == {0: "consistent 0.231"}
    assert _quoted_prints("```python\nprint(x)  # prints: consistent 1.5 [1.11, 1.84]: inside\n```\n") == {
        0: "consistent 1.5 [1.11, 1.84]"}
    assert _same_print("consistent 1.5 [1.12, 1.84]\n['x']\n", "consistent 1.5 [1.11, 1.84]")
    assert _same_print("noise\nconsistent 0.232\n", "consistent 0.231")
    assert not _same_print("consistent 0.147\n", "consistent 0.231")  # the guide's own model once drifted so
    assert not _same_print("inconclusive 0.231\n", "consistent 0.231")
    assert _same_print("inconclusive 7.30 float-bits", "inconclusive 7.18 float-bits")  # within 2%
    assert not _same_print("8.807", "8.6")  # 2 units of the last digit: 0.2


def test_readme_is_a_front_door_and_the_docs_index_lists_every_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.encode("utf-8")) <= 9 * 1024
    assert 'pip install torch==2.13.0 && pip install -e ".[test]" && python -m pytest -q' in readme  # .ci/run
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    for page in sorted((ROOT / "docs").glob("*.md")):
        if page.name != "index.md":
            assert f"]({page.name})" in index, f"docs/index.md does not list {page.name}"
    assert "| `python benchmarks/" in (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")


def test_a_first_audit_without_a_model_never_imports_torch_dynamo():
    """Fitting the portfolio's learned scores must not build a torch.optim optimiser, which imports
    torch._dynamo (about 2.8 s of a process's first audit); checked in a fresh process (a work bound)."""
    script = ("import sys, dpaudit\n"
              "mech = dpaudit.make('pnsgd', n=20, dim=3, eta=0.1, sigma=1.0, domain='ball', radius=1.0)\n"
              "result = dpaudit.audit(mech, trials=4000, delta=1e-5)\n"
              "portfolio = result.attack['portfolio']\n"
              "assert {'logistic', 'mlp'} <= {c['name'] for c in portfolio if c['applicable']}, portfolio\n"
              "print(sorted(m for m in ('torch._dynamo', 'statsmodels', 'pandas') if m in sys.modules))\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"
