"""The zoo: every bug whose true epsilon exceeds its claim by 30% is caught; correct twins never are.

Each audit is at confidence 0.95, so a correct twin whose claim is exact
(Laplace, randomized response) could be flagged with probability at most
0.05 per seed; none is over the seeds below. Fixed seeds make runs repeatable.
"""

from __future__ import annotations

import json

import pytest

from dpaudit.cli import main
from dpaudit.auditing.checks.zoo import VARIANTS, run_zoo

CATCHABLE = [v for v in VARIANTS if v.buggy and v.true_epsilon is not None]


@pytest.fixture(scope="module")
def zoo_runs():
    # the textbook zoo; the real-world bugs have their own tests (tests/audit/test_zoo_realworld.py)
    return {seed: run_zoo(seed=seed, variants=VARIANTS) for seed in (0, 1, 2)}


def test_every_catchable_bug_is_caught(zoo_runs):
    for seed, results in zoo_runs.items():
        by_name = {r.name: r for r in results}
        for variant in CATCHABLE:
            result = by_name[variant.name]
            if variant.true_epsilon >= 1.3 * result.claimed_epsilon:
                assert result.caught, (seed, result)
            assert result.trials <= 1_000_000  # the work bound (trials), not seconds


def test_no_correct_variant_is_flagged(zoo_runs):
    for seed, results in zoo_runs.items():
        for result in results:
            if not result.buggy:
                assert not result.caught, (seed, result)
                if result.true_epsilon is not None:  # the claims of the correct twins are valid
                    assert result.claimed_epsilon >= result.true_epsilon - 1e-9


def test_stop_variant_true_epsilons_are_the_exact_values():
    from dpaudit import mechanisms
    from dpaudit.auditing.checks.zoo.variants import STOP_TRUE_EPSILON
    from dpaudit.mechanisms.accounting.instances import exact_epsilon

    for variant in VARIANTS:
        if variant.name.startswith("stop-pnsgd-fixed-stop"):
            pair, claim, _ = variant.build()
            # the buggy stop is always n: the plain variant on the same instance
            mech = claim if not variant.buggy else mechanisms.make(
                "pnsgd", **{**claim.params, "variant": "plain"})
            exact = exact_epsilon(mech, pair.dataset_a, pair.dataset_b, variant.delta)
            assert exact == pytest.approx(variant.true_epsilon, abs=1e-8)
            assert variant.true_epsilon == STOP_TRUE_EPSILON["buggy" if variant.buggy else "correct"]


def test_zoo_lists_the_issue_bugs():
    names = {v.name for v in VARIANTS if v.buggy}
    assert {"pnsgd-noise-eta-twice", "kernel-noiseless-last-step", "gaussian-sensitivity-L-not-2L",
            "pnsgd-no-clipping", "stop-pnsgd-fixed-stop", "multi-epoch-one-epoch-claim", "laplace-scale-halved",
            "shuffle-does-not-shuffle", "rr-wrong-flip-probability"} <= names
    assert all(f"{name}:correct" in {v.name for v in VARIANTS} for name in names)


def test_zoo_cli_json(capsys):
    assert main(["zoo", "--json", "--only", "laplace-scale", "rr-wrong"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert len(document["variants"]) == 4
    for entry in document["variants"]:
        assert {"name", "buggy", "caught", "epsilon_lower_bound", "claimed_epsilon", "trials", "seconds"} <= set(entry)
        assert entry["caught"] == entry["buggy"]


def test_zoo_exits_1_when_a_bug_beyond_its_claim_is_missed(capsys):
    # 100 trials cannot catch the halved Laplace scale (true 2.0 against a claim of 0.5)
    assert main(["zoo", "--json", "--only", "laplace-scale-halved", "--trials", "100"]) == 1
    captured = capsys.readouterr()
    document = json.loads(captured.out)
    statuses = {entry["name"]: entry["status"] for entry in document["variants"]}
    assert statuses["laplace-scale-halved"] == "missed" and document["failed"] == ["laplace-scale-halved"]
    assert "laplace-scale-halved" in captured.err


def test_a_bug_within_its_claim_is_shown_as_such():
    from dpaudit.auditing.checks.zoo.runner import ZooResult

    stop = next(v for v in VARIANTS if v.name == "stop-pnsgd-fixed-stop")
    result = ZooResult(stop.name, True, False, 1.37, 4.5, stop.true_epsilon, 1e-5, 1000, 0.1, "")
    assert result.status == "within-claim" and not result.failed
    assert ZooResult("x", True, False, 0.1, 0.5, 2.0, 1e-5, 10, 0.1, "").status == "missed"
    assert ZooResult("x:correct", False, True, 0.6, 0.5, 0.4, 1e-5, 10, 0.1, "").status == "false-alarm"
