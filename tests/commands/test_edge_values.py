"""Edge values of every numeric key of a config: refused before any trial with one line naming the key, or a
result (issue 58).

Each value goes through ``dpaudit run`` (a config file, in-process) and through ``dpaudit.audit`` (keyword
arguments). ``Mechanism.sample`` is counted: a refusal must come before the first trial (exit 2, one line on
stderr naming the key, a ``ParameterError`` from Python), and an accepted value must give a result whose
certified bound is a number, with no traceback, no ``math domain error`` and no warning from the library's own
arithmetic (``RuntimeWarning`` is an error in this module). The keys are the ``[audit]`` settings and the
parameters of the audited mechanism (``gaussian``, the one every first audit meets); the parameters of every
other mechanism are swept through validation in ``test_every_mechanism_refuses_or_accepts_edge_values``.
"""

from __future__ import annotations

import json
import math

import pytest

import dpaudit
from dpaudit import mechanisms
from dpaudit.cli import main
from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.base import Mechanism

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

INF, NAN = math.inf, math.nan
#: integers: nothing, negative, the least count, a fraction, beyond int64, a bool
INTEGERS = (0, -1, 1, 2.5, 2**63, True)
#: reals: zero, negative, the smallest float, tiny and huge magnitudes, infinities, not a number, a bool
REALS = (0.0, -1.0, 5e-324, 1e-300, 1e300, INF, -INF, NAN, True)
#: the [audit] keys and their edges (the probabilities also at their open ends)
AUDIT = {"trials": INTEGERS + (400,), "seed": INTEGERS + (2**63 - 1,), "chunk_size": INTEGERS,
         "delta": REALS + (1 - 2**-53,), "confidence": REALS + (1 - 2**-53,),
         "calibration_fraction": REALS + (0.5 - 2**-54,)}
MECHANISM = {"dim": INTEGERS, "sensitivity": REALS, "sigma": REALS}
CASES = [("audit", key, value) for key, values in AUDIT.items() for value in values] + \
        [("mechanism", key, value) for key, values in MECHANISM.items() for value in values]
#: the audit around each edge: the smallest that the default portfolio accepts (the trial floor is one of the edges)
BASE_TRIALS = 400


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    return str(value)


@pytest.fixture
def sampled(monkeypatch):
    """How many times any mechanism sampled."""
    calls = []
    original = Mechanism.sample

    def counted(self, *args, **kwargs):
        calls.append(type(self).__name__)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Mechanism, "sample", counted)
    return calls


def _ids(case) -> str:
    table, key, value = case
    return f"{key}={value!r}"


@pytest.mark.parametrize("case", CASES, ids=[_ids(case) for case in CASES])
def test_run_refuses_before_any_trial_or_gives_a_result(case, tmp_path, capsys, sampled):
    table, key, value = case
    mechanism = {"name": '"gaussian"', **({key: _toml(value)} if table == "mechanism" else {})}
    audit = {"trials": str(BASE_TRIALS), **({key: _toml(value)} if table == "audit" else {})}
    config = tmp_path / "edge.toml"
    config.write_text("[mechanism]\n" + "".join(f"{k} = {v}\n" for k, v in mechanism.items())
                      + "[audit]\n" + "".join(f"{k} = {v}\n" for k, v in audit.items()))
    code = main(["run", str(config), "--store", str(tmp_path / "s.sqlite"), "--workers", "1", "--quiet",
                 "--json"])
    out, err = capsys.readouterr()
    assert code in (0, 2), err
    if code == 2:
        assert sampled == [] and out == ""
        lines = err.strip().splitlines()
        assert len(lines) == 1 and key in lines[0], err
        assert "math domain error" not in err and "Traceback" not in err
    else:
        result = json.loads(out)
        assert sampled and math.isfinite(result["empirical"]["epsilon_lower_bound"])
        assert result["verdict"] in ("consistent", "inconclusive", "violation")


@pytest.mark.parametrize("case", CASES, ids=[_ids(case) for case in CASES])
def test_audit_refuses_before_any_trial_or_gives_a_result(case, sampled):
    table, key, value = case
    settings = {"trials": BASE_TRIALS, **({key: value} if table == "audit" else {})}
    try:
        mech = dpaudit.make("gaussian", **({key: value} if table == "mechanism" else {}))
        result = dpaudit.audit(mech, **settings)
    except ParameterError as error:
        assert sampled == [] and key in str(error) and "math domain error" not in str(error)
        return
    assert sampled and math.isfinite(result.epsilon_lower_bound)


def _numeric_parameters():
    for name, cls in sorted(mechanisms.registered().items()):
        for parameter in mechanisms.describe(cls):
            default = parameter.default
            if isinstance(default, (int, float)) and not isinstance(default, bool):
                yield name, parameter.name, isinstance(default, int)


@pytest.mark.parametrize("name, key, integral", list(_numeric_parameters()),
                         ids=[f"{name}.{key}" for name, key, _ in _numeric_parameters()])
def test_every_mechanism_refuses_or_accepts_edge_values(name, key, integral):
    """Every numeric parameter of every registered mechanism, at every edge: refused naming the key, or a
    mechanism whose audit passes every check before the first trial (a job is made: sizes, settings and
    canaries checked)."""
    from dpaudit.auditing.jobs.job import make_job

    for value in (INTEGERS if integral else REALS):
        try:
            mech = dpaudit.make(name, **{key: value})
            make_job(mech, trials=BASE_TRIALS)
        except ParameterError as error:
            assert key in str(error), (value, str(error))


#: small instances of the registered mechanisms (any other registered name is audited with its defaults)
SMALL = {"dp-sgd": {"n": 10, "batch_size": 2, "steps": 5}, "dp-lssgd": {"n": 10, "batch_size": 2, "steps": 5},
         "pnsgd": {"n": 5}, "multi-epoch-pnsgd": {"n": 5, "epochs": 2}, "projected-kernel": {"n": 5},
         "shuffled-rr": {"n": 10}, "model": {"model": "softmax", "data": "iris", "steps": 2, "batch_size": 8}}


@pytest.mark.parametrize("name", sorted(mechanisms.registered()))
def test_delta_zero_on_every_mechanism_gives_a_result_or_one_line(name, tmp_path, capsys, sampled):
    """delta = 0 is a valid setting: every mechanism's audit at delta 0 gives a result, its claims that need
    delta > 0 listed as not applicable with the reason, through dpaudit.audit and dpaudit run alike; dpaudit run
    refuses before any trial (one line) an audit whose every claim for the canary's relation needs delta > 0."""
    from dpaudit.mechanisms.accounting.entry import NEEDS_POSITIVE_DELTA

    params = SMALL.get(name, {})
    if name == "model":
        pytest.importorskip("sklearn")
    result = dpaudit.audit(dpaudit.make(name, **params), delta=0.0, trials=BASE_TRIALS)
    assert sampled and math.isfinite(result.epsilon_lower_bound) and result.empirical.delta == 0.0
    for claim in result.claims:
        assert claim.applicable or claim.reason, claim
        assert not claim.applicable or (claim.epsilon is not None and math.isfinite(claim.epsilon)), claim
    needs = [claim for claim in result.claims if claim.reason == NEEDS_POSITIVE_DELTA]
    assert all(not claim.applicable and claim.epsilon is None for claim in needs)
    relation = result.canary["relation"]  # the verdict compares the claims of the canary's relation only
    unjudged = any(c.relation == relation for c in needs) and not any(c.is_bound and c.relation == relation
                                                                      for c in result.claims)
    if unjudged:
        assert result.verdict == "inconclusive", result.verdict
        assert "need" in result.verdict_reason and "delta > 0" in result.verdict_reason, result.verdict_reason
    config = tmp_path / "zero.toml"
    keys = "".join(f"{k} = {repr(v) if isinstance(v, str) else _toml(v)}\n" for k, v in params.items())
    config.write_text(f'[mechanism]\nname = "{name}"\n{keys}[audit]\ndelta = 0\ntrials = {BASE_TRIALS}\n')
    before = len(sampled)
    code = main(["run", str(config), "--store", str(tmp_path / "s.sqlite"), "--workers", "1", "--quiet", "--json"])
    out, err = capsys.readouterr()
    if unjudged:  # dpaudit run refuses, before any trial, an audit no claim could judge (issue 73)
        assert code == 2 and len(sampled) == before and out == "", err
        assert err.count("\n") == 1 and "[audit] delta = 0" in err and "needs delta > 0" in err, err
        return
    assert code == 0, err
    document = json.loads(out)
    assert document["empirical"]["delta"] == 0 and document["empirical"]["epsilon_lower_bound"] >= 0
    assert document["empirical"]["epsilon_lower_bound"] == pytest.approx(result.epsilon_lower_bound)
