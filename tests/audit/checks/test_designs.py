"""Audit designs as objects: each checks its own settings, runs as the keywords it replaces ran, and
``dpaudit.audit`` calls the design's ``run`` without branching on it."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap

import pytest

import dpaudit
from dpaudit.auditing.checks import api
from dpaudit.auditing.checks.designs import AuditDesign, AuditOptions, AuditTarget, ManyRuns, OneRun, PairSearch
from dpaudit.auditing.jobs.config import parse_config
from dpaudit.auditing.jobs.one_run_design import ONE_RUN_DEFAULTS
from dpaudit.auditing.statistics.settings import AUDIT_DEFAULTS
from dpaudit.core.errors import ParameterError


def _comparable(result) -> dict:
    """A result's document without what differs between two runs of one audit (timings)."""
    document = result.to_dict()
    document.pop("timings", None)
    return document


@pytest.mark.parametrize("design, settings, message", [
    (ManyRuns, {"trials": 5}, "trials must be an integer >= 20, got trials=5"),
    (ManyRuns, {"chunk_size": 0}, "chunk_size must be a positive integer, got chunk_size=0"),
    (ManyRuns, {"calibration_fraction": 0.5}, "calibration_fraction must be a number in (0, 0.5)"),
    (ManyRuns, {"threshold": "middle"}, "threshold must be one of 'split', 'union', got threshold='middle'"),
    (ManyRuns, {"sequential": "yes"}, "sequential must be True or False, got sequential='yes'"),
    (ManyRuns, {"calibration_chunk": 0}, "calibration_chunk must be >= 1, got calibration_chunk=0"),
    (OneRun, {"canaries": 1}, "canaries must be >= 2, got canaries=1"),
    (OneRun, {"runs": 101}, "runs must be <= 100, got runs=101"),
    (OneRun, {"method": "magic"}, "method must be one of 'fdp', 'steinke', 'tail', got method='magic'"),
    (OneRun, {"kind": "dirac"}, "kind must be one of 'gradient', 'input', got kind='dirac'"),
    (PairSearch, {"screen_trials": 10}, "screen_trials must be >= 20, got screen_trials=10"),
    (PairSearch, {"record_domain": (1.0, 0.0)}, "record_domain must be two finite numbers low < high"),
    (PairSearch, {"record_domain": (0.0, 1.0), "thresholds": [2.0]}, "thresholds must lie in the record domain"),
    (PairSearch, {"sensitivity": 2.0}, "sensitivity applies to a search over query answers only"),
    (PairSearch, {"queries": 3, "record_domain": (0.0, 1.0)}, "record_domain does not apply to a search over query"),
    (PairSearch, {"queries": 3, "relation": "some"}, "relation must be one of 'component-wise', 'one-answer'"),
])
def test_each_design_refuses_a_bad_setting_naming_it_and_its_value(design, settings, message):
    with pytest.raises(ParameterError) as caught:
        design(**settings)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_many_runs_is_the_default_design_of_the_keywords():
    mech = dpaudit.make("gaussian", sigma=2.0)
    spelt = dpaudit.audit(mech, trials=2_000, chunk_size=500, seed=3)
    built = dpaudit.audit(mech, design=ManyRuns(trials=2_000, chunk_size=500), seed=3)
    assert built.epsilon_lower_bound == spelt.epsilon_lower_bound > 0 and built.verdict == spelt.verdict
    assert _comparable(built) == _comparable(spelt)
    looking = dpaudit.audit(mech, design=ManyRuns(trials=2_000, chunk_size=500, sequential=True), seed=3)
    assert _comparable(looking) == _comparable(dpaudit.audit(mech, trials=2_000, chunk_size=500, seed=3,
                                                             sequential=True))
    assert looking.sequential and looking.audit_id != built.audit_id  # looks are another audit of the same trials
    with pytest.raises(ParameterError, match=r"give trials to ManyRuns\(\.\.\.\), not beside it"):
        dpaudit.audit(mech, design=ManyRuns(), trials=2_000)


def test_one_run_object_runs_as_design_one_run():
    mech = dpaudit.make("model", model="softmax", data="iris", steps=10, batch_size=16, noise_multiplier=1.0)
    spelt = dpaudit.audit(mech, design="one-run", canaries=50, seed=2)
    built = dpaudit.audit(mech, design=OneRun(canaries=50), seed=2)
    assert built.audit["design"] == "one-run" and built.one_run["canaries"] == 50
    assert built.epsilon_lower_bound == spelt.epsilon_lower_bound and built.verdict == spelt.verdict
    assert _comparable(built) == _comparable(spelt)
    with pytest.raises(ParameterError, match="design='one-run' takes no dataset_pair"):
        dpaudit.audit(mech, design=OneRun(canaries=50), dataset_pair=([[0.0]], [[1.0]]))
    with pytest.raises(ParameterError, match=r"canary kind 'input' is not the design's OneRun\(kind='gradient'\)"):
        dpaudit.audit(mech, design=OneRun(canaries=50), canary={"kind": "input"})
    with pytest.raises(ParameterError, match="one_run_method must be one of"):  # the keyword's own name
        dpaudit.audit(mech, design="one-run", one_run_method="magic")


ACTUAL_SIZE = textwrap.dedent("""
    import numpy as np

    def actual_size(records, rng):
        x = np.clip(records[:, 0], 0.0, 1.0)
        return np.rint((x.sum() + rng.normal(0.0, 2.0)) / max(len(x), 1) * 4096.0) / 4096.0  # bug: the actual size
""")


def test_pair_search_object_runs_as_search_true():
    namespace: dict = {}
    exec(ACTUAL_SIZE, namespace)  # noqa: S102 - the test's own code
    mech = dpaudit.from_callable(namespace["actual_size"], 1, record_domain=(0.0, 1.0))
    spelt = dpaudit.audit(mech, search={"screen_trials": 100, "max_candidates": 30}, trials=2_000, seed=0)
    built = dpaudit.audit(mech, design=PairSearch(screen_trials=100, max_candidates=30, trials=2_000), seed=0)
    direct = dpaudit.search(mech, screen_trials=100, max_candidates=30, trials=2_000, seed=0).result
    assert built.epsilon_lower_bound == spelt.epsilon_lower_bound == direct.epsilon_lower_bound > 0
    assert built.verdict == spelt.verdict and _comparable(built) == _comparable(spelt)
    with pytest.raises(ParameterError, match="runs in memory; it takes no store"):
        dpaudit.audit(mech, design=PairSearch(), store="elsewhere.sqlite")
    with pytest.raises(ParameterError, match="search has no option 'screen'.*did you mean 'screen_trials'"):
        dpaudit.audit(mech, search={"screen": 100})


class _Recorder:
    """A design of one's own: it satisfies the protocol by its ``run`` alone."""

    def __init__(self) -> None:
        self.seen: list[tuple[AuditTarget, AuditOptions]] = []

    def run(self, target: AuditTarget, options: AuditOptions):
        self.seen.append((target, options))
        return "result"


def test_audit_calls_the_design_and_never_branches_on_it():
    function = ast.parse(textwrap.dedent(inspect.getsource(api.audit))).body[0]
    branches = [node for node in ast.walk(function) if isinstance(node, (ast.If, ast.IfExp, ast.Match, ast.Try))]
    assert branches == []
    calls = [node for node in ast.walk(function) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Attribute) and node.func.attr == "run"]
    assert len(calls) == 1 and [ast.unparse(a) for a in calls[0].args] == ["target", "options"]
    # a new design is one class: audit hands it what is audited and what every design shares
    mech, design = dpaudit.make("gaussian"), _Recorder()
    assert isinstance(design, AuditDesign)
    assert dpaudit.audit(mech, design=design, index=None, seed=4, delta=1e-6, title="mine") == "result"
    (target, options), = design.seen
    assert target.mechanism is mech and (options.seed, options.delta, options.title) == (4, 1e-6, "mine")
    with pytest.raises(ParameterError, match="give canaries to _Recorder"):
        dpaudit.audit(mech, design=_Recorder(), canaries=10)


def test_configs_build_their_design_object():
    many, = parse_config({"mechanism": {"name": "gaussian"}, "audit": {"trials": 2_000, "chunk_size": 500}})
    assert many.design == ManyRuns(trials=2_000, chunk_size=500)
    assert many.with_trials(4_000).design == ManyRuns(trials=4_000, chunk_size=500)
    one, = parse_config({"mechanism": {"name": "model", "model": "softmax", "data": "iris", "steps": 10},
                         "canary": {"kind": "input"}, "audit": {"design": "one-run", "canaries": 50, "runs": 2}})
    assert one.design == OneRun(canaries=50, runs=2, kind="input") and one.with_trials(4_000) is one
    with pytest.raises(ParameterError, match=r"\[audit\] one_run_method must be one of"):
        parse_config({"mechanism": {"name": "model", "model": "softmax", "data": "iris"},
                      "audit": {"design": "one-run", "one_run_method": "magic"}})


def test_the_designs_are_public():
    assert {"ManyRuns", "OneRun", "PairSearch"} <= set(dpaudit.__all__)
    assert (dpaudit.ManyRuns, dpaudit.OneRun, dpaudit.PairSearch) == (ManyRuns, OneRun, PairSearch)
    # the defaults are the [audit] table's, declared once
    assert dataclasses.asdict(ManyRuns()) == {**{key: AUDIT_DEFAULTS[key] for key in
                                                 ("trials", "chunk_size", "calibration_fraction", "threshold")},
                                              "sequential": False, "calibration_chunk": None}
    assert (OneRun().canaries, OneRun().runs, OneRun().method) == tuple(ONE_RUN_DEFAULTS.values())
