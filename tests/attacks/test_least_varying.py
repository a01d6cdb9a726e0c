"""The ``least-varying`` canary direction: chosen from the background records, before any trial."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit import mechanisms
from dpaudit.attacks.canaries import CanarySpec, least_varying_direction
from dpaudit.mechanisms.dataset import Dataset
from dpaudit.core.errors import ParameterError


def test_linear_records_in_a_plane_leave_the_normal_direction():
    mech = mechanisms.make("dp-sgd", n=30, dim=3, batch_size=5, steps=5, sampling="poisson")
    rng = np.random.default_rng(0)
    records = np.c_[rng.standard_normal((30, 2)), np.zeros(30)] @ np.array([[1, 0, 0], [0, 0.6, 0.8], [0, 0.8, -0.6]])
    u = least_varying_direction(mech, Dataset(records), 30)
    assert np.abs(u @ np.array([0.0, 0.8, -0.6])) == pytest.approx(1.0, abs=1e-9)
    pair = CanarySpec(kind="gradient", pair="zero", direction="least-varying", background=None).build(
        mechanisms.make("dp-sgd", n=30, dim=3, batch_size=5, steps=5, sampling="poisson"), 30)
    assert np.linalg.norm(pair.dataset_a.injected[30]) == pytest.approx(1.0)


def test_model_direction_carries_far_less_background_than_the_first_axis():
    pytest.importorskip("sklearn")
    mech = mechanisms.make("model", steps=2, batch_size=64)
    gradients = mech.clipped_record_gradients(mech.default_dataset())
    u = least_varying_direction(mech, mech.default_dataset(), mech.n_records)
    first = np.zeros_like(u)
    first[0] = 1.0
    # breast cancer at the start point: about 6e-4 against 4.6 along the first weight
    assert np.sum((gradients @ u) ** 2) < 1e-3 * np.sum((gradients @ first) ** 2)


def test_unknown_direction_names_are_refused():
    with pytest.raises(ParameterError, match="canary direction"):
        CanarySpec(direction="quietest")
    with pytest.raises(ParameterError, match="per-record gradients"):
        CanarySpec(kind="input", direction="least-varying").build(mechanisms.make("gaussian"), None)
