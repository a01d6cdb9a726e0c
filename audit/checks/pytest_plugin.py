"""pytest plugin (entry point ``pytest11``): the ``dp_audit`` fixture and the ``dp_audit`` marker.

``dp_audit(mechanism, epsilon=..., delta=..., **kwargs)`` calls
:func:`audit.checks.regression.assert_private` (every applicable score, looks planned from the budget, stop at
the first certified violation) with the budget of the closest
``@pytest.mark.dp_audit(trials=..., confidence=..., seed=..., audits=...)``
marker (a module sets it with ``pytestmark``). ``--dp-audit-split`` divides
the session's failure probability ``1 - confidence`` over every audit the
collected tests declare (``audits`` per test, default 1), so that a correct
code base fails the whole session with probability at most ``1 - confidence``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from dpaudit.auditing.checks.regression import PrivacyViolation, assert_private

DEFAULT_TRIALS = 100_000


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dpaudit", "privacy regression tests")
    group.addoption("--dp-audit-confidence", type=float, default=None,
                    help="confidence of each audit, or of the whole session with --dp-audit-split (default 0.95)")
    group.addoption("--dp-audit-split", action="store_true",
                    help="split the failure probability over all audits of the session (Bonferroni)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "dp_audit(trials=None, confidence=None, seed=None, audits=1): budget of privacy audits")
    config.stash[_RECORDS] = []
    config.stash[_COUNT] = 0


_RECORDS = pytest.StashKey[list]()
_COUNT = pytest.StashKey[int]()


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    count = 0
    for item in items:
        if "dp_audit" in getattr(item, "fixturenames", ()):
            marker = item.get_closest_marker("dp_audit")
            count += int(marker.kwargs.get("audits", 1)) if marker else 1
    config.stash[_COUNT] = count


@pytest.fixture
def dp_audit(request: pytest.FixtureRequest):
    """A callable ``(mechanism, *, epsilon, delta, **kwargs) -> summary`` that fails the test on a violation."""
    config = request.config
    marker = request.node.get_closest_marker("dp_audit")
    budget: dict[str, Any] = dict(marker.kwargs) if marker else {}
    budget.pop("audits", None)
    base = config.getoption("--dp-audit-confidence") or budget.pop("confidence", None) or 0.95
    budget.pop("confidence", None)
    if config.getoption("--dp-audit-split"):
        base = 1 - (1 - base) / max(config.stash[_COUNT], 1)
    trials = budget.pop("trials", None) or DEFAULT_TRIALS

    def audit(mechanism, *, epsilon: float, delta: float, **kwargs: Any) -> dict[str, Any]:
        __tracebackhide__ = True  # a failure shows the violation message, not this helper
        options = {"confidence": base, **budget, **kwargs}
        if isinstance(options.get("design", "many-runs"), str):  # a design object holds its own budget
            options.setdefault("trials", trials)
        record = {"test": request.node.nodeid, "mechanism": mechanism.label,
                  "claimed_epsilon": epsilon, "delta": delta}
        try:
            summary = assert_private(mechanism, epsilon=epsilon, delta=delta, **options)
        except PrivacyViolation as violation:
            record.update(outcome="violation", message=str(violation))
            config.stash[_RECORDS].append(record)
            raise
        record.update(outcome="ok", epsilon_lower_bound=summary["epsilon_lower_bound"],
                      confidence=summary["confidence"], trials=summary["trials"], score=summary["score"],
                      design=summary.get("design", "many-runs"))
        config.stash[_RECORDS].append(record)
        return summary

    return audit


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under pytest-xdist, a worker hands its audits' records to the controller (``workeroutput``)."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:
        workeroutput["dpaudit_records"] = json.dumps(session.config.stash.get(_RECORDS, []), default=str)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: absent without it
def pytest_testnodedown(node: Any, error: Any) -> None:
    """The controller collects each worker's records, so the summary lists every audit of the session."""
    records = getattr(node, "workeroutput", {}).get("dpaudit_records")
    if records:
        node.config.stash[_RECORDS].extend(json.loads(records))


@pytest.hookimpl(trylast=True)  # after pytest's own failure report
def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    records = config.stash.get(_RECORDS, [])
    if not records:
        return
    terminalreporter.section("dpaudit privacy audits")
    for record in records:
        if record["outcome"] == "ok":
            terminalreporter.write_line(
                f"ok         {record['test']}: eps >= {record['epsilon_lower_bound']:.4f} <= claimed "
                f"{record['claimed_epsilon']:g} (delta {record['delta']:g}, confidence {record['confidence']:.4g}"
                f"{', anytime-valid' if record.get('design') == 'anytime' else ''}, "
                f"{record['trials']} trials, score {record['score']})")
        else:
            terminalreporter.write_line(f"VIOLATION  {record['test']}: {record['message']}")
