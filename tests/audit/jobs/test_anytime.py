"""The anytime-valid design end to end (audit/jobs/anytime.py): stops, resumption, ids, the result and reports."""

from __future__ import annotations

import pytest

import dpaudit
from dpaudit.auditing.jobs import anytime
from dpaudit.auditing.jobs.anytime import AnytimeJob, chunk_schedule
from dpaudit.auditing.jobs.job import make_job
from dpaudit.auditing.jobs.result import AuditResult
from dpaudit.auditing.jobs.runner import RunOptions, run_audits
from dpaudit.core.errors import ParameterError
from dpaudit.reports.render import render

MEMORY = RunOptions(store=":memory:", workers=1, progress=False)


def _job(claim: float | None, trials: int = 20_000, seed: int = 0, **kwargs) -> AnytimeJob:
    mechanism = dpaudit.make("laplace", scale=1.0)  # replace-one on its default canary: exactly 2-DP
    return AnytimeJob(make_job(mechanism, trials=trials, seed=seed, claimed_epsilon=claim, score="projection"),
                      **kwargs)


def test_schedule_doubles_to_the_largest_chunk_and_adds_up_to_the_budget():
    assert chunk_schedule(100, 1_000, 5_000) == [100, 100, 200, 400, 800, 1000, 1000, 1000, 400]
    assert chunk_schedule(100, 10_000, 150) == [100, 50]
    with pytest.raises(ParameterError, match="first"):
        chunk_schedule(5, 1_000, 5_000)


def test_a_violation_stops_at_its_first_certified_trial():
    result = run_audits([_job(1.0)], MEMORY)[0]
    record = result.anytime
    assert result.verdict == "violation" and record["stopped"] == "violation"
    assert record["stopping_trial"] < record["trials_drawn"] < 20_000
    # the bound at the stopping trial is above the claim, and the trajectory says when it got there
    steps = record["positions"]["0"]["trajectory"]
    assert min(t for t, bound in steps if bound > 1.0) == record["stopping_trial"]


def test_a_claim_out_of_reach_stops_for_futility_and_a_correct_one_is_not_flagged():
    result = run_audits([_job(6.0, trials=200_000)], MEMORY)[0]
    assert result.anytime["stopped"] == "futility" and result.anytime["trials_drawn"] < 200_000
    assert result.verdict == "consistent" and 0 < result.epsilon_lower_bound <= 2.0


def test_without_futility_it_watches_the_whole_budget():
    result = run_audits([_job(6.0, trials=3_000, futility=False)], MEMORY)[0]
    assert result.anytime["stopped"] == "budget" and result.anytime["trials_drawn"] == 3_000


def test_killed_and_resumed_it_gets_the_same_stopping_time_and_figures(tmp_path, monkeypatch):
    store = str(tmp_path / "store.sqlite")
    options = RunOptions(store=store, workers=1, progress=False)
    original, calls = anytime._step, []

    def killed(*args, **kwargs):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt  # killed after three chunks of the stream (the claim 1.6 stops in the fifth)
        return original(*args, **kwargs)

    monkeypatch.setattr(anytime, "_step", killed)
    with pytest.raises(KeyboardInterrupt):
        run_audits([_job(1.6)], options)
    monkeypatch.setattr(anytime, "_step", original)
    resumed = run_audits([_job(1.6)], options)[0]
    fresh = run_audits([_job(1.6)], MEMORY)[0]
    assert resumed.timings["chunks_reused"] >= 8  # the four chunks per side drawn before the kill
    for key in ("stopped", "stopping_trial", "trials_drawn", "positions"):
        assert resumed.anytime[key] == fresh.anytime[key], key
    assert resumed.epsilon_lower_bound == fresh.epsilon_lower_bound


def test_the_budget_is_not_part_of_what_is_drawn():
    assert _job(1.0, trials=5_000).draws_id == _job(1.0, trials=50_000).draws_id
    assert _job(1.0, trials=5_000).audit_id != _job(1.0, trials=50_000).audit_id
    assert _job(1.0, seed=1).draws_id != _job(1.0).draws_id
    assert _job(1.0, first=200).draws_id != _job(1.0).draws_id


def test_the_design_refuses_bad_settings_naming_them():
    with pytest.raises(ParameterError, match="first"):
        _job(1.0, first=5)
    with pytest.raises(ParameterError, match="first"):
        _job(1.0, trials=500, first=1_000)


def test_result_round_trips_and_every_report_speaks_of_the_design():
    result = run_audits([_job(1.0)], MEMORY)[0]
    again = AuditResult.from_dict(result.to_dict())
    assert again.anytime == result.to_dict()["anytime"]
    markdown = render(result, "md")
    assert "## Anytime-valid audit" in markdown and result.anytime["meaning"] in markdown
    assert f"first certified at trial {result.anytime['stopping_trial']}" in markdown
    assert "No model-based figure" in markdown and "mu >= 0.000 with" not in markdown
    page = render(result, "html")
    assert 'id="anytime"' in page and "running certified bound" in page.lower()
    assert "e-process" in page and "failure_split" not in page


@pytest.mark.parametrize("settings, name", [
    ({"budget": 10}, "budget"), ({"first": 5}, "first"), ({"budget": 100, "first": 200}, "first"),
    ({"futility": "yes"}, "futility"), ({"chunk_size": 0}, "chunk_size")])
def test_the_design_object_refuses_bad_settings_naming_them(settings, name):
    with pytest.raises(ParameterError, match=name):
        dpaudit.Anytime(**settings)


def test_audit_with_the_design_object_is_the_job_it_builds():
    mechanism = dpaudit.make("laplace", scale=1.0)
    through_audit = dpaudit.audit(mechanism, design=dpaudit.Anytime(budget=20_000), claimed_epsilon=1.0,
                                  score="projection")
    direct = run_audits([_job(1.0)], MEMORY)[0]
    assert through_audit.anytime["positions"] == direct.anytime["positions"]
    assert through_audit.audit_id == direct.audit_id
    with pytest.raises(ParameterError, match="estimators"):
        dpaudit.audit(mechanism, design=dpaudit.Anytime(), estimators=[object()])
    with pytest.raises(ParameterError, match="give trials to Anytime"):
        dpaudit.assert_private(mechanism, epsilon=2.0, delta=0.0, trials=1_000, design=dpaudit.Anytime())


CONFIG = """
[mechanism]
name = "laplace"
scale = 1.0

[attack]
score = "projection"

[audit]
design = "anytime"
{extra}
"""


def test_a_config_names_the_design_and_its_keys(tmp_path):
    from dpaudit.auditing.jobs.config import ConfigError, load_configs  # the config loader, as the CLI uses it

    path = tmp_path / "anytime.toml"
    path.write_text(CONFIG.format(extra="budget = 3000\nfirst = 200\nfutility = false"))
    (config,) = load_configs([str(path)])
    assert config.design == dpaudit.Anytime(budget=3_000, first=200, futility=False)
    result = run_audits([config.job()], MEMORY)[0]
    assert result.anytime["stopped"] == "budget" and result.anytime["trials_drawn"] == 3_000
    assert config.with_trials(1_000).design.budget == 1_000
    path.write_text(CONFIG.format(extra="trials = 3000"))
    with pytest.raises(ConfigError, match=r"\[audit\] trials: does not apply to design = 'anytime'"):
        load_configs([str(path)])
    path.write_text(CONFIG.format(extra="").replace('design = "anytime"', "budget = 5"))
    with pytest.raises(ConfigError, match=r"\[audit\] budget: applies to design = 'anytime' only"):
        load_configs([str(path)])


def test_the_run_summary_says_how_the_anytime_audit_stopped_and_fits_no_gdp(tmp_path, capsys):
    from dpaudit.cli import main  # the command line, as a user runs it

    path = tmp_path / "anytime.toml"
    path.write_text(CONFIG.format(extra="budget = 2000"))
    assert main(["run", str(path), "--store", str(tmp_path / "s.sqlite"), "--workers", "1"]) == 0
    summary = capsys.readouterr().err
    row = next(line for line in summary.splitlines() if "laplace audit" in line)
    assert "n/a" in row and "0.0000" not in row
    assert "anytime-valid: epsilon is at least" in summary and "stopped because" in summary


def test_several_positions_state_the_audit_confidence_and_each_position_s():
    mechanism = dpaudit.make("pnsgd", n=20, dim=2, eta=0.1, sigma=1.0, domain="ball", radius=1.0)
    result = dpaudit.audit(mechanism, design=dpaudit.Anytime(budget=2_000), index=[1, 20], score="projection")
    assert result.empirical.confidence == 0.95 and result.empirical.per_index_confidence == pytest.approx(0.975)
    markdown = render(result, "md")
    assert "Certified with confidence 0.95 over all 2 canary positions" in markdown
    assert "At canary index 1, the e-process testing" in markdown
