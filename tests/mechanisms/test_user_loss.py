"""Losses of the user's own (``loss = "FILE.py:NAME"``) and the concave construction in the samplers."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit import mechanisms
from dpaudit.attacks.canaries import CanarySpec
from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.dataset import Dataset

SOURCE = '''
import numpy as np
import torch


def linear(w, record):
    return record.expand_as(w).clone()


def huge(w, record):
    return torch.full_like(w, 1e6)


def numpy_rows(w, record):
    return np.ones(tuple(w.shape))


def scalar(w, record):
    return w.sum()
'''


@pytest.fixture
def losses(tmp_path):
    path = tmp_path / "losses.py"
    path.write_text(SOURCE)
    return path


def test_a_linear_loss_of_ones_own_moves_iterates_like_the_built_in(losses):
    # all-ones records (norm 1 = L): each step moves theta by -eta (mean gradient 1) exactly, with noise
    # eta s sqrt(T) in total; 5000 trials: the means agree within 5 standard errors of their difference
    params = {"n": 6, "batch_size": 3, "steps": 8, "noise_std": 0.5, "eta": 0.2}
    data = Dataset(np.ones((6, 1)))
    own = mechanisms.make("dp-sgd", loss=f"{losses}:linear", **params).sample(data, trials=5_000, seed=1)
    built = mechanisms.make("dp-sgd", loss="linear", **params).sample(data, trials=5_000, seed=2)
    error = 0.2 * 0.5 * np.sqrt(8) * np.sqrt(2 / 5_000)
    assert abs(own.mean() - built.mean()) < 5 * error and abs(own.mean() + 0.2 * 8) < 5 * error


def test_gradients_of_ones_own_are_clipped_to_the_lipschitz_bound(losses):
    mech = mechanisms.make("dp-sgd", n=4, batch_size=4, steps=5, noise_std=1e-6, eta=1.0, lipschitz=0.5,
                           loss=f"{losses}:huge")
    out = mech.sample(None, trials=10, seed=0)
    assert np.allclose(out, -5 * 0.5, atol=1e-3)  # every step moves theta by eta * L, not by 1e6


def test_numpy_results_are_accepted_and_wrong_shapes_refused(losses):
    mech = mechanisms.make("dp-sgd", n=4, batch_size=2, steps=3, loss=f"{losses}:numpy_rows")
    assert mech.sample(None, trials=4, seed=0).shape == (4, 1)
    with pytest.raises(ParameterError, match=r"loss: .*scalar' returned shape \(\) .* shape \(trials, dim\)"):
        mechanisms.make("dp-sgd", loss=f"{losses}:scalar")
    with pytest.raises(ParameterError, match="has no name 'nothing'"):
        mechanisms.make("dp-sgd", loss=f"{losses}:nothing")


def test_a_loss_of_ones_own_takes_gradient_canaries_only(losses):
    mech = mechanisms.make("dp-sgd", n=4, batch_size=2, steps=3, loss=f"{losses}:linear")
    assert mech.canary_kinds == ("gradient",)
    with pytest.raises(ParameterError, match="canary kind 'input' is not supported"):
        CanarySpec(kind="input").build(mech, 4)
    claims = {claim.name: claim for claim in mech.claims()}
    assert claims["wor-rdp-thm27"].applicable  # composition: every record moves the mean by at most 2L/m


@pytest.mark.parametrize("loss", ["concave", "user"])
def test_pnsgd_keeps_only_composition_for_losses_that_are_not_convex(losses, loss):
    name = "concave" if loss == "concave" else f"{losses}:linear"
    for mech in (mechanisms.make("pnsgd", n=4, loss=name), mechanisms.make("multi-epoch-pnsgd", n=4, loss=name)):
        claims = mech.claims(index=1)
        kept = {claim.name for claim in claims if claim.applicable}
        assert kept and kept <= {"local-rdp", "local-rdp-composed"}
        reasons = [claim.reason for claim in claims if not claim.applicable]
        assert all("not convex" in reason or "not known to be convex" in reason for reason in reasons)
        assert mech.sample(None, trials=3, seed=0).shape == (3, 1)
        assert (mech.user_function is not None) == (loss == "user")  # its source enters the fingerprint


def test_the_concave_loss_expands_the_iterate(losses):
    # no noise to speak of, start 0, one canary gradient L at step 1: theta_T = -eta (L/m) a^(T-1), a = 1 + eta beta
    mech = mechanisms.make("dp-sgd", n=2, batch_size=2, steps=6, noise_std=1e-9, eta=0.5, loss="concave",
                           smoothness=2.0)
    pair = CanarySpec(steps=[1]).build(mech, None)
    out = mech.sample(pair.dataset_a, trials=3, seed=0)
    assert np.allclose(out, -0.5 * 0.5 * 2.0**5, atol=2.0**-12)
    claims = {claim.name: claim for claim in mech.claims()}
    bounded = {c.name: c for c in mechanisms.make("dp-sgd", domain="ball", loss="concave").claims()}
    assert not bounded["bounded-domain-rdp"].applicable and "not convex" in bounded["bounded-domain-rdp"].reason
    assert claims["wor-rdp-thm27"].applicable
