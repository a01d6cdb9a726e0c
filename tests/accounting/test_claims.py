"""Every mechanism's claims: applicability, reasons, monotonicity and paper numbers."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpaudit import mechanisms
from dpaudit.cli import main
from dpaudit.mechanisms.accounting import lssgd, profiles, subsampling
from dpaudit.mechanisms.accounting.claims import evaluate_claims


def by_name(claims, delta=1e-5):
    return {entry.name: entry.to_dict() for entry in evaluate_claims(claims, delta=delta)}


@pytest.mark.parametrize("name", sorted(mechanisms.registered()))
def test_every_mechanism_has_claims_with_citations(name):
    claims = mechanisms.make(name).claims()
    assert claims, name
    for claim in claims:
        assert claim.citation and claim.relation in ("replace-one", "add-remove", "zero-out")
        entry = claim.evaluate(delta=1e-5).to_dict()
        assert entry["applicable"] == (entry["reason"] == "")
        if entry["applicable"]:
            assert entry["epsilon"] is None or entry["epsilon"] >= 0


def test_gaussian_claim_is_the_exact_profile():
    mech = mechanisms.make("gaussian", sensitivity=1.0, sigma=1.0)
    entries = {e.relation: e.to_dict() for e in evaluate_claims(mech.claims(), delta=1e-5)}
    assert entries["add-remove"]["epsilon"] == pytest.approx(4.3772, abs=1e-4)
    assert entries["replace-one"]["epsilon"] == pytest.approx(profiles.gaussian_epsilon(1e-5, 2.0))


def test_pnsgd_not_applicable_reasons():
    entries = by_name(mechanisms.make("pnsgd", loss="logistic", lipschitz=1.0, eta=10.0).claims())
    assert not entries["pabi-rdp"]["applicable"]
    assert "eta > 2/beta" in entries["pabi-rdp"]["reason"] and "eta=10.0" in entries["pabi-rdp"]["reason"]
    assert entries["contraction-egamma"]["applicable"]  # D_j = diam(K) + 2 eta L still holds
    entries = by_name(mechanisms.make("pnsgd", loss="quadratic", domain="whole").claims())
    assert "not Lipschitz on K" in entries["pabi-rdp"]["reason"]
    entries = by_name(mechanisms.make("pnsgd", dim=2, noise="laplace", scale=1.0, sigma=None,
                                      domain="box").claims())
    assert "K an interval (dim=1" in entries["contraction-laplace"]["reason"]
    assert "Gaussian noise" in entries["pabi-rdp"]["reason"]


def test_stop_pnsgd_claim_uses_only_valid_orders():
    mech = mechanisms.make("pnsgd", variant="stop", sigma=0.5, n=100)
    entries = by_name(mech.claims())
    assert entries["stop-rdp"]["applicable"]
    assert entries["contraction-stopped"]["applicable"]
    tiny = mechanisms.make("pnsgd", variant="stop", sigma=1e-3, n=100)
    entries = by_name(tiny.claims())
    assert not entries["stop-rdp"]["applicable"]
    assert "sigma < L sqrt(2 (alpha - 1) alpha)" in entries["stop-rdp"]["reason"]


def test_contraction_stopped_is_clamped_and_vacuous_when_large():
    mech = mechanisms.make("pnsgd", variant="stop", sigma=0.05, n=3, eta=0.01, domain="whole")
    claim = next(c for c in mech.claims() if c.name == "contraction-stopped")
    assert claim.delta(0.0) <= 1.0
    entry = claim.evaluate(epsilon=0.0).to_dict()
    assert entry["delta"] == pytest.approx(1.0)
    assert any("vacuous" in note for note in entry["notes"])


def test_per_index_thm23_and_thm4_for_pnsgd():
    mech = mechanisms.make("pnsgd", n=10, sigma=2.0, eta=0.1, domain="box", low=0.0, high=1.0)
    first = by_name(mech.claims(index=1))
    last = by_name(mech.claims(index=10))
    assert first["pabi-rdp"]["epsilon"] < last["pabi-rdp"]["epsilon"]
    assert last["pabi-rdp"]["index"] == 10
    # the last index of Thm 4 is the Gaussian mechanism with mu = 2L/sigma
    assert last["contraction-egamma"]["epsilon"] == pytest.approx(profiles.gaussian_epsilon(1e-5, 1.0), rel=1e-9)
    with pytest.raises(ValueError, match="index must be in 1..10, got index=11"):
        mech.claims(index=11)


def test_kernel_reset_steps_erase_earlier_canaries():
    mech = mechanisms.make("projected-kernel", n=10, step="reset", sigma=1.0)
    early = by_name(mech.claims(index=3))
    assert early["pabi-shift-reduction"]["epsilon"] == 0.0
    assert early["contraction-egamma"]["epsilon"] == 0.0
    late = by_name(mech.claims(index=10))
    assert late["contraction-egamma"]["epsilon"] == pytest.approx(profiles.gaussian_epsilon(1e-5, 2.0), rel=1e-9)


def test_subsampling_claims_vanish_without_sampling():
    # a vanishing sample rate gives vanishing epsilon (q -> 0 limit)
    epsilon, delta = subsampling.amplify_by_subsampling(3.0, 1e-5, 0.0)
    assert epsilon == 0.0 and delta == 0.0
    values = [by_name(mechanisms.make("dp-sgd", n=n, batch_size=1, steps=10, noise_std=1.0,
                                      sampling="poisson").claims())["sgm-rdp"]["epsilon"]
              for n in (10, 100, 10_000, 1_000_000)]
    # with z = 1 the useful orders stay small, so epsilon falls only like 1/log(1/q)
    assert np.all(np.diff(values) < 0)


def test_multi_epoch_claims():
    mech = mechanisms.make("multi-epoch-pnsgd", n=20, epochs=20, sigma=2.0, eta=0.5, domain="ball")
    entries = by_name(mech.claims(index=20))
    assert entries["multi-epoch-rdp"]["epsilon"] <= entries["multi-epoch-thm35"]["epsilon"]
    assert entries["bounded-domain-rdp"]["applicable"]
    many = mechanisms.make("multi-epoch-pnsgd", n=20, epochs=200, sigma=2.0, eta=0.5, domain="ball")
    entries = by_name(many.claims())
    assert "Thm 35 takes E <= n epochs" in entries["multi-epoch-thm35"]["reason"]
    assert entries["bounded-domain-rdp"]["epsilon"] < entries["multi-epoch-rdp"]["epsilon"]


# The DP-LSSGD authors' MNIST script (logistic regression, n = 60000, batch 128,
# 50 epochs of 469 steps, delta = 1e-5, G = 1) lists the noise for each target
# epsilon: 0.1 -> 0.3471, 0.15 -> 0.2316, 0.2 -> 0.1739, 0.25 -> 0.1393, 0.3 -> 0.1162.
MNIST = [(0.1, 0.3471), (0.15, 0.2316), (0.2, 0.1739), (0.25, 0.1393), (0.3, 0.1162)]


@pytest.mark.parametrize("epsilon, nu", MNIST)
def test_lssgd_claim_reproduces_the_papers_mnist_noise(epsilon, nu):
    steps = 50 * 469
    assert lssgd.lssgd_claim_noise(epsilon=epsilon, delta=1e-5, steps=steps, n=60_000, lipschitz=1.0) \
        == pytest.approx(nu, abs=1e-4)
    assert lssgd.lssgd_claim_epsilon(noise_std=nu, delta=1e-5, steps=steps, n=60_000, lipschitz=1.0) \
        == pytest.approx(epsilon, rel=2e-3)


def test_lssgd_claims_show_the_accountant_beside_the_paper():
    steps = 50 * 469
    poisson = mechanisms.make("dp-lssgd", n=60_000, dim=10, batch_size=128, steps=steps, noise_std=0.3471,
                              sampling="poisson")
    entries = by_name(poisson.claims())
    paper, accountant = entries["lssgd-paper-thm1"], entries["sgm-rdp"]
    assert paper["epsilon"] == pytest.approx(0.1, rel=1e-3)
    assert accountant["epsilon"] < paper["epsilon"] and not paper["notes"]
    # sampling without replacement (replace-one): WBK Thm 27 gives 0.1004 > 0.1, so the claim is flagged
    wor = mechanisms.make("dp-lssgd", n=60_000, dim=10, batch_size=128, steps=steps, noise_std=0.3471,
                          sampling="without-replacement")
    entries = by_name(wor.claims())
    paper = entries["lssgd-paper-thm1"]
    assert entries["wor-rdp-thm27"]["epsilon"] > paper["epsilon"]
    assert paper["below_accountant"] and "does not support the claim" in paper["notes"][0]


def test_lssgd_claim_condition_is_checked():
    mech = mechanisms.make("dp-lssgd", n=100_000, batch_size=1, steps=10, noise_std=1e-4, sampling="poisson")
    entry = by_name(mech.claims())["lssgd-paper-thm1"]
    assert not entry["applicable"] and "Thm 1 assumes eps^2 <= 5 T log(1/delta) b^2 / n^2" in entry["reason"]


def test_shuffle_claims():
    mech = mechanisms.make("shuffled-rr", n=100_000, epsilon0=1.0)
    entries = by_name(mech.claims())
    assert entries["shuffle-amplification"]["epsilon"] < entries["local-randomized-response"]["epsilon"]
    assert entries["local-randomized-response"]["epsilon"] == pytest.approx(1.0, abs=1e-3)
    small = by_name(mechanisms.make("shuffled-rr", n=50, epsilon0=2.0).claims())
    assert not small["shuffle-amplification"]["applicable"]
    assert "epsilon0 > log(n / (16 log(2/delta)))" in small["shuffle-amplification"]["reason"]


@settings(max_examples=15, deadline=None)
@given(name=st.sampled_from(["pnsgd", "projected-kernel", "gaussian", "laplace", "shuffled-rr"]),
       eps=st.lists(st.floats(0.0, 12.0), min_size=2, max_size=5))
def test_claim_delta_falls_as_epsilon_grows(name, eps):
    grid = sorted(eps)
    for claim in mechanisms.make(name).claims():
        if claim.applicable:
            values = [claim.delta(e) for e in grid]
            assert all(b <= a + 1e-12 for a, b in zip(values, values[1:])), claim.name


def test_bound_cli_per_index_json(capsys):
    argv = ["bound", "pnsgd", "--set", "n=8", "--set", "sigma=2", "--set", "domain=box", "--set", "low=0",
            "--set", "high=1", "--delta", "1e-5", "--index", "all", "--json"]
    assert main(argv) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["mechanism"]["name"] == "pnsgd" and document["mechanism"]["params"]["n"] == 8
    assert len(document["per_index"]) == 8
    curves = {}
    for row in document["per_index"]:
        for entry in row["claims"]:
            assert entry["index"] in (row["index"], None)
            curves.setdefault(entry["name"], []).append(entry["epsilon"])
    assert np.all(np.diff(curves["pabi-rdp"]) > 0) and np.all(np.diff(curves["contraction-egamma"]) > 0)
    assert {"name", "applicable", "epsilon", "delta", "index"} <= set(document["claims"][0])


def test_bound_cli_errors(capsys):
    assert main(["bound", "pnsgd", "--delta", "1e-5", "--epsilon", "1"]) == 2
    assert main(["bound", "pnsgd", "--set", "sigma", "--delta", "1e-5"]) == 2
    assert main(["bound", "pnsgd", "--delta", "1e-5", "--index", "x"]) == 2
    assert main(["bound", "nope", "--delta", "1e-5"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 4 and all(line.startswith("dpaudit: error:") for line in lines)
    assert main(["bound", "pnsgd", "--epsilon", "1.0"]) == 0


@pytest.mark.parametrize("sampling, noise_std", [("poisson", 0.1), ("poisson", 1.0), ("without-replacement", 2.0)])
def test_subsampling_composition_delta_is_its_epsilon_read_the_other_way(sampling, noise_std):
    # delta(eps) in closed form (per-step epsilon from the amplification, T q delta_step): the smallest delta
    # whose epsilon (the claim's epsilon_fn, rounded up) is at most eps, as bisection on that epsilon finds it
    from dpaudit.mechanisms.accounting.claims import delta_for_epsilon

    mech = mechanisms.make("dp-sgd", n=40, dim=1, batch_size=4, steps=30, noise_std=noise_std, sampling=sampling)
    claim = next(c for c in mech.claims() if c.name == "subsampling-composition")
    for eps in [0.05, 0.5, 1.0, 2.0, 4.0, 8.0, 30.0]:
        closed, bisected = claim.delta(eps), min(delta_for_epsilon(claim.epsilon_fn, eps), 1.0)
        assert closed == pytest.approx(bisected, rel=1e-6), eps  # bisection stops at 2^-60 of 745 in log delta
        if closed < 1.0:
            assert claim.epsilon(closed) <= eps * (1 + 1e-9), eps  # the pair it states is one the theorem gives
    # at eps = 0 the theorem's delta is T q delta_step(0), below 1 at these noises (bisection stopped at 1: the
    # amplified 0 rounds to 1e-16 without replacement)
    if noise_std >= 1.0:
        assert claim.delta(0.05) < claim.delta(0.0) < 1.0


def test_base_epsilon_inverts_the_amplification():
    for q in (1e-4, 0.1, 0.5, 1.0):
        for eps in (1e-6, 0.3, 2.0, 50.0):
            amplified = float(subsampling.amplify_by_subsampling(subsampling.base_epsilon(eps, q), 0.0, q)[0])
            assert amplified == pytest.approx(eps, rel=1e-9), (q, eps)
    assert subsampling.base_epsilon(0.0, 0.1) == 0.0 and np.isfinite(subsampling.base_epsilon(1e4, 0.01))
