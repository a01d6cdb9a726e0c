"""The command line: JSON output, one-line errors and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dpaudit.cli import main


def test_list_json_names_every_mechanism(capsys):
    assert main(["list", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    names = {entry["name"] for entry in document["mechanisms"]}
    assert {"gaussian", "laplace", "projected-kernel", "pnsgd", "multi-epoch-pnsgd",
            "dp-sgd", "dp-lssgd", "shuffled-rr"} <= names
    pnsgd = next(e for e in document["mechanisms"] if e["name"] == "pnsgd")
    params = {p["name"]: p for p in pnsgd["params"]}
    assert params["sigma"]["default"] == 1.0 and params["variant"]["doc"]


def test_list_text(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "pnsgd" in out
    assert "(default None)" not in out and out.count("(default") > 50  # a default is shown when there is one
    for line in out.splitlines():
        assert line.count("default") <= 1 and line.count("(required)") <= 1, line  # said once a parameter
    assert "beta of the quadratic or concave loss (default 1)\n" in out  # the doc's own default, once
    assert "sigma        standard deviation of the Gaussian noise (default 1.0)" in out
    assert "scale of the Laplace noise of each step (optional)" in out


def test_bad_command_exits_2_with_one_line():
    result = subprocess.run([sys.executable, "-m", "dpaudit", "frobnicate"],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "invalid choice: 'frobnicate'" in result.stderr
    assert "Traceback" not in result.stderr


def test_index_all_needs_records_in_order(capsys):
    # shuffled-rr has n users but no order after the shuffle: per-index claims do not exist
    assert main(["bound", "shuffled-rr", "--set", "n=20", "--delta", "1e-5", "--index", "all"]) == 2
    assert "needs a mechanism with records in a fixed order" in capsys.readouterr().err


def test_a_misspelt_mechanism_gets_a_suggestion(capsys):
    assert main(["bound", "pnsdg", "--delta", "1e-5"]) == 2
    assert "did you mean 'pnsgd'?" in capsys.readouterr().err


def test_count_flags_accept_integral_floats_and_blame_the_flag(tmp_path, capsys):
    from dpaudit.commands.common import count

    parse = count(20)
    assert parse("1e5") == 100_000 and parse("100000") == 100_000 and parse("2.0e3") == 2000
    config = tmp_path / "small.toml"
    config.write_text('[mechanism]\nname = "gaussian"\n[audit]\ntrials = 1000\n')
    for flag_value, expected in (("-5", "argument --trials: must be an integer >= 20, got -5"),
                                 ("1.5e2x", "argument --trials: must be an integer, got '1.5e2x'"),
                                 ("2.5", "argument --trials: must be an integer, got '2.5'")):
        assert main(["run", str(config), "--trials", flag_value, "--store", str(tmp_path / "s.sqlite")]) == 2
        err = capsys.readouterr().err
        assert expected in err and "small.toml" not in err  # the flag is wrong, not the config
    assert main(["run", str(config), "--trials", "2e3", "--store", str(tmp_path / "s.sqlite"), "--quiet",
                 "--workers", "1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["audit"]["trials"] == 2000


def test_report_accepts_an_id_prefix_and_says_what_it_wrote(tmp_path, capsys):
    import dpaudit

    store = str(tmp_path / "s.sqlite")
    result = dpaudit.audit(dpaudit.make("gaussian", sigma=2.0), trials=1_000, store=store)
    out = tmp_path / "r.md"
    assert main(["report", result.audit_id[:6], "--store", store, "--format", "md", "--out", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().err and out.read_text().startswith("# ")
    other = dpaudit.audit(dpaudit.make("gaussian", sigma=3.0), trials=1_000, store=store)
    common = next(i for i in range(16) if result.audit_id[i] != other.audit_id[i])
    if common > 0:  # both ids share a prefix: it is ambiguous
        assert main(["report", result.audit_id[:common], "--store", store, "--format", "md",
                     "--out", str(out)]) == 2
        assert "ambiguous" in capsys.readouterr().err
    assert main(["report", "", "--store", store, "--format", "md", "--out", str(out)]) == 2


def test_scalars_where_a_one_dimensional_vector_is_expected():
    from dpaudit import make
    from dpaudit.attacks.canaries import CanarySpec

    mech = make("pnsgd", n=3, dim=1, domain="box", low=0.0, high=1.0, init=0.5)
    assert mech.init == (0.5,) and mech.params["init"] == [0.5]
    assert CanarySpec(direction=2.0).direction == (2.0,)


def test_help_and_version_start_fast_without_torch():
    # Issue 17: --help and --version import no torch, NumPy or SciPy. CPU time of the child is measured
    # with resource.getrusage; the bound of 1 s is generous (measured: about 0.08 s on 2 cores).
    import resource

    for flag in ("--help", "--version"):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        result = subprocess.run([sys.executable, "-m", "dpaudit", flag], capture_output=True, text=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        assert result.returncode == 0 and "dpaudit" in result.stdout
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        assert cpu < 1.0, (flag, cpu)
    probe = ("import sys; from dpaudit.cli import _build_parser; _build_parser(); "
             "print(sorted(m for m in ('torch', 'numpy', 'scipy', 'statsmodels') if m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip() == "[]"


def test_estimate_threshold_choices_match_the_estimators():
    from dpaudit.auditing.statistics.estimators import STRATEGIES
    from dpaudit.commands import estimate

    assert estimate.STRATEGIES == STRATEGIES


def test_sweep_titles_and_summary_rows_name_the_swept_values(tmp_path, capsys):
    config = tmp_path / "sweep.toml"
    config.write_text('title = "a long title that the old summary table used to cut short"\n'
                      '[mechanism]\nname = "gaussian"\n[audit]\ntrials = 400\n'
                      '[sweep]\nsigma = [1.0, 2.0]\n"audit.delta" = [1e-5, 1e-6]\n')
    assert main(["run", str(config), "--store", str(tmp_path / "s.sqlite"), "--json"]) == 0
    captured = capsys.readouterr()
    titles = [audit["title"] for audit in json.loads(captured.out)["audits"]]
    stem = "a long title that the old summary table used to cut short"
    assert titles == [f"{stem} (sigma={s}, audit.delta={d})" for s in (1.0, 2.0) for d in (1e-05, 1e-06)]
    for title in titles:
        assert title in captured.err  # whole titles in the summary


def test_one_progress_bar_over_calibration_and_certification(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[mechanism]\nname = "gaussian"\n[audit]\ntrials = 4000\nchunk_size = 1000\n')
    result = subprocess.run([sys.executable, "-m", "dpaudit", "run", str(config), "--store",
                             str(tmp_path / "s.sqlite"), "--workers", "1"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    bars = [part for part in result.stderr.replace("\r", "\n").splitlines() if "sampling" in part]
    # one total: 1 + 1 calibration chunks (400 trials) and 4 + 4 certification chunks (3600 trials)
    assert bars and all("/10" in bar for bar in bars)
    assert any("certification" in bar for bar in bars) and any("calibration" in bar for bar in bars)
    assert "10/10" in bars[-1]


def test_run_then_check_of_the_dp_sgd_example_are_two_audits_whose_reports_say_why(tmp_path, capsys):
    """``check`` looks at the trials several times and pays for each look, so it certifies another figure from
    the same stored trials: it is another audit (its own id and report files, so ``--out`` into ``run``'s folder
    replaces nothing), it computes no chunk ``run`` stored, and its headline, reading guide, JSON and summary
    line state the one confidence of the audit and what each look cost."""
    from pathlib import Path

    example = str(Path(__file__).resolve().parents[2] / "examples" / "dp_sgd.toml")
    common = ["--store", str(tmp_path / "s.sqlite"), "--out", str(tmp_path / "out"), "--trials", "20000",
              "--workers", "1", "--json"]
    assert main(["run", example, *common]) == 0
    ran_out = capsys.readouterr()
    ran = json.loads(ran_out.out)
    assert main(["check", example, *common]) == 0
    checked_out = capsys.readouterr()
    checked = json.loads(checked_out.out)
    assert checked["audit_id"] != ran["audit_id"] and checked["sequential"]["same_trials_as"] == ran["audit_id"]
    assert checked["timings"]["chunks_computed"] == 0  # the same trials: every chunk of run's was read back
    assert ran["empirical"]["confidence"] == checked["empirical"]["confidence"] == 0.95
    assert checked["sequential"]["look_confidence"] == pytest.approx(0.975)  # the last look: half of beta
    assert checked["empirical"]["epsilon_lower_bound"] <= ran["empirical"]["epsilon_lower_bound"]
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == sorted(f"{audit}.{ext}" for audit in (ran["audit_id"], checked["audit_id"])
                           for ext in ("html", "json", "md"))
    report = (tmp_path / "out" / f"{checked['audit_id']}.md").read_text()
    headline = report.splitlines()[2]
    looks = checked["sequential"]["looks_planned"]
    assert f"Certified with confidence 0.95 over the {looks} planned looks of a sequential audit" in headline
    assert "this look's bound at confidence 0.975" in headline
    assert f"every look taken, the last is look {looks}" in headline and "stopped early" not in headline
    assert f"(dpaudit run: audit id {ran['audit_id']})" in report and "an audit id, and report file names" in report
    assert "sequential" not in (tmp_path / "out" / f"{ran['audit_id']}.md").read_text().lower()
    summary = [line for line in checked_out.err.splitlines() if line.startswith(checked["audit_id"])]
    assert len(summary) == 1 and " 0.95 " in summary[0]
    assert f"confidence 0.95 over the {looks} planned looks" in checked_out.err
    assert f"without looks (dpaudit run): {ran['audit_id']}" in checked_out.err
