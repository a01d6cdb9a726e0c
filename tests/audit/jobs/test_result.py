"""The typed result: built by the pipeline, serialised with the design's keys, read back unchanged."""

from __future__ import annotations

import dataclasses
import json

import pytest

import dpaudit
from dpaudit.auditing.jobs.result import SCHEMA_VERSION, AuditResult, ResultError, load_result


@pytest.fixture(scope="module")
def result() -> AuditResult:
    mech = dpaudit.make("projected-kernel", n=5, dim=1, sigma=1.0, domain="whole")
    return dpaudit.audit(mech, canary={"kind": "reset"}, index=[2, 5], trials=4_000, delta=1e-5, seed=2)


def test_the_top_level_api():
    import dpaudit.auditing.jobs.runner  # noqa: F401  (importing the audit package rebinds nothing)

    assert callable(dpaudit.audit)
    for name in ("make", "from_callable", "audit", "assert_private", "PrivacyViolation", "load_result"):
        assert name in dir(dpaudit)
    with pytest.raises(AttributeError, match="no attribute 'frobnicate'"):
        dpaudit.frobnicate  # noqa: B018


def test_result_is_frozen_and_round_trips(result, tmp_path):
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.verdict = "violation"
    document = result.to_dict()
    assert document["schema_version"] == SCHEMA_VERSION == 3
    assert isinstance(document["empirical"]["trials"], int) and document["empirical"]["trials"] == 4_000
    assert [row["index"] for row in document["per_index"]] == [2, 5]
    for key in ("epsilon_lower_bound", "confidence", "delta", "trials", "method", "mu_lower_bound"):
        assert key in document["empirical"]
    for key in ("name", "applicable", "epsilon", "delta", "index"):
        assert all(key in claim for claim in document["claims"])
    assert len(document["code_fingerprint"]) == 16
    # JSON text, back to the same object
    path = tmp_path / "r.json"
    path.write_text(json.dumps(result.to_dict(), allow_nan=False))
    again = load_result(path)
    assert again.to_dict() == json.loads(json.dumps(document))
    assert load_result(document).to_dict() == again.to_dict()


def test_load_result_from_a_store_and_refusals(tmp_path):
    store = tmp_path / "s.sqlite"
    mech = dpaudit.make("gaussian", sigma=2.0)
    stored = dpaudit.audit(mech, trials=2_000, store=str(store))
    assert load_result(stored.audit_id, store=store).to_dict() == stored.to_dict()
    for version in (1, 2):  # 2: references were applicable claims
        old = {**stored.to_dict(), "schema_version": version}
        with pytest.raises(ResultError, match=f"schema_version {version} is not supported"):
            load_result(old)
    with pytest.raises(ResultError, match="not a dpaudit result"):
        load_result({"hello": 1})
    broken = stored.to_dict()
    del broken["per_index"]
    with pytest.raises(ResultError, match="missing or malformed"):
        load_result(broken)
