"""Tight accountants: PLD for Poisson DP-SGD, WBK Thm 27 without replacement, theory slack in results.

References are computed here directly with dp-accounting (Google), the
library the claims use: these tests pin the mapping from a mechanism's
parameters to the accountant's event (sampling rate, noise multiplier,
neighbouring relation, steps), which is where a claim can go wrong.
"""

from __future__ import annotations

import logging

import pytest
from dp_accounting import NeighboringRelation, dp_event
from dp_accounting.pld import pld_privacy_accountant, privacy_loss_distribution
from dp_accounting.rdp import rdp_privacy_accountant

import dpaudit
from dpaudit import mechanisms
from dpaudit.mechanisms.accounting.lssgd import lssgd_claim_noise

DELTA = 1e-5
SETTINGS = [(q, z, steps) for q in (0.01, 0.1) for z in (0.7, 1.0, 2.0) for steps in (1, 100, 1000)]


def _dpsgd(q: float, z: float, steps: int, sampling: str = "poisson"):
    n, batch = 1000, int(round(q * 1000))
    return mechanisms.make("dp-sgd", n=n, batch_size=batch, steps=steps, noise_std=z / batch, sampling=sampling)


def _tightest(mech, relation: str) -> float:
    entries = [c.evaluate(delta=DELTA).to_dict() for c in mech.claims()]
    return min(e["epsilon"] for e in entries if e["applicable"] and e["relation"] == relation
               and e["epsilon"] is not None)


@pytest.mark.parametrize("q, z, steps", SETTINGS)
def test_poisson_dpsgd_tightest_claim_sits_between_optimistic_and_pessimistic_pld(q, z, steps):
    logging.getLogger().setLevel(logging.ERROR)  # dp-accounting warns about the optimistic algorithm
    pessimistic = privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=z, sampling_prob=q, value_discretization_interval=1e-4,
        pessimistic_estimate=True).self_compose(steps).get_epsilon_for_delta(DELTA)
    optimistic = privacy_loss_distribution.from_gaussian_mechanism(
        standard_deviation=z, sampling_prob=q, value_discretization_interval=1e-4, pessimistic_estimate=False,
        use_connect_dots=False).self_compose(steps).get_epsilon_for_delta(DELTA)
    tightest = _tightest(_dpsgd(q, z, steps), "add-remove")
    assert optimistic <= tightest <= 1.01 * pessimistic, (optimistic, tightest, pessimistic)


def _thm27_epsilon(n: int, batch: int, z: float, steps: int) -> float:
    accountant = rdp_privacy_accountant.RdpAccountant(neighboring_relation=NeighboringRelation.REPLACE_ONE)
    accountant.compose(dp_event.SampledWithoutReplacementDpEvent(n, batch, dp_event.GaussianDpEvent(z)), steps)
    return accountant.get_epsilon(DELTA)


@pytest.mark.parametrize("q, z, steps", SETTINGS)
def test_without_replacement_claim_is_wbk_thm27(q, z, steps):
    mech = _dpsgd(q, z, steps, sampling="without-replacement")
    entries = {c.name: c.evaluate(delta=DELTA).to_dict() for c in mech.claims()}
    # replace-one moves the sum by twice the clipping norm: noise multiplier z / 2
    reference = _thm27_epsilon(mech.n, mech.batch_size, z / 2, steps)
    assert entries["wor-rdp-thm27"]["epsilon"] == pytest.approx(reference, rel=1e-8)
    # the Thm 9 claim beside it is gone (one without-replacement rule: dp-accounting's); Thm 27 <= Thm 9 is
    # checked on the RDP curves in test_profiles_rdp.py
    assert "wor-rdp" not in entries


def test_dp_lssgd_paper_claim_beside_the_accountant_at_mnist_settings():
    n, batch = 50_000, 128
    steps = 50 * n // batch
    nu = lssgd_claim_noise(epsilon=0.2, delta=DELTA, steps=steps, n=n, lipschitz=1.0)
    mech = mechanisms.make("dp-lssgd", n=n, dim=10, batch_size=batch, steps=steps, noise_std=nu,
                           sampling="without-replacement")
    entries = {c.name: c.evaluate(delta=DELTA).to_dict() for c in mech.claims()}
    from dpaudit.mechanisms.accounting.claims import evaluate_claims

    evaluated = {e.name: e.to_dict() for e in evaluate_claims(mech.claims(), delta=DELTA)}
    thm27 = _thm27_epsilon(n, batch, nu * batch / 2, steps)
    assert entries["wor-rdp-thm27"]["epsilon"] == pytest.approx(thm27, rel=1e-8)
    assert thm27 == pytest.approx(0.2125, abs=1e-3)  # the accountant, against the paper's 0.2
    assert entries["lssgd-paper-thm1"]["epsilon"] == pytest.approx(0.2, rel=1e-9)
    assert evaluated["lssgd-paper-thm1"].get("below_accountant")
    assert "wor-rdp-thm27" in evaluated["lssgd-paper-thm1"]["notes"][0]


def test_bound_composes_1000_steps_in_one_self_composition(capsys, monkeypatch):
    # the work, not the seconds (timings live in benchmarks/): the 1000 steps are one PLD built once and
    # self-composed once (dp-accounting composes a count by repeated squaring), on a grid of bounded size
    from dpaudit.cli import main
    from dpaudit.mechanisms.accounting import tight

    composed = []
    real_compose = pld_privacy_accountant.PLDAccountant.compose

    def counted_compose(self, event, count=1):
        composed.append(count)
        return real_compose(self, event, count)

    monkeypatch.setattr(pld_privacy_accountant.PLDAccountant, "compose", counted_compose)
    tight._pld.cache_clear()
    assert main(["bound", "dp-sgd", "--set", "n=1000", "--set", "batch_size=100", "--set", "steps=1000",
                 "--set", "noise_std=0.007", "--set", "sampling=poisson", "--delta", "1e-5", "--json"]) == 0
    assert "sgm-pld" in capsys.readouterr().out
    assert composed == [1000]  # the slowest of the 18 settings above (q = 0.1, z = 0.7)
    tight._pld.cache_clear()


def test_results_carry_the_theory_slack():
    mech = dpaudit.make("projected-kernel", n=4, dim=1, noise="laplace", sigma=None, scale=1.0,
                        step="contraction", contraction=0.5, domain="box", low=-1.0, high=1.0)
    result = dpaudit.audit(mech, canary={"kind": "gradient"}, index=2, trials=2_000, delta=DELTA)
    slack = result.per_index[0].theory_slack
    claims = [c for c in result.per_index[0].claims if c.applicable and c.kind == "upper-bound"
              and c.relation == "replace-one" and c.epsilon is not None]
    assert slack["tightest"] == min(claims, key=lambda c: c.epsilon).name
    assert all(c.slack >= 1.0 for c in claims)
    assert slack["exact_epsilon"] is not None and slack["tightest_over_exact"] >= 1.0
    document = result.to_dict()
    assert document["per_index"][0]["theory_slack"]["tightest"] == slack["tightest"]
    from dpaudit.reports.render import render

    assert "Theory slack" in render(result, "md") and "theory-slack" in render(result, "html")
