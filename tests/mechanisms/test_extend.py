"""Adding a mechanism means adding one class: this file defines one and audits it end to end.

Nothing else in dpaudit knows about ``NoisyCount``: it brings its own
parameters, sampler, claim and canary records, and is never registered.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

import dpaudit
from dpaudit.mechanisms.accounting.claims import profile_claim
from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon, gaussian_log_delta
from dpaudit.mechanisms.base import Mechanism
from dpaudit.mechanisms.dataset import Dataset
from dpaudit.core.validation import check_real


@dataclasses.dataclass(frozen=True)
class NoisyCount(Mechanism):
    """The number of records equal to 1, plus Gaussian noise (records are bits)."""

    name = "test-noisy-count"
    summary = "a count of ones plus N(0, sigma^2)"

    sigma: float = 1.0
    claimed_sigma: float | None = None  # a broken claim may assume less noise than is added

    def validate(self) -> None:
        check_real("sigma", self.sigma, positive=True)

    @property
    def output_dim(self) -> int:
        return 1

    @property
    def record_dim(self) -> int:
        return 1

    @property
    def n_records(self) -> None:
        return None

    def _sample(self, data: Dataset, trials: int, rng: np.random.Generator, dtype: torch.dtype) -> torch.Tensor:
        count = float((data.records[:, 0] == 1).sum())
        return torch.from_numpy(rng.standard_normal((trials, 1)) * self.sigma + count)

    def canary_records(self, u, *, reset=False):
        return np.array([1.0]), np.array([0.0]), np.array([-1.0])  # the count is larger under S

    def _claims(self, index):
        mu = 1.0 / (self.claimed_sigma or self.sigma)  # replace-one sensitivity of a count of bits: 1
        return [profile_claim("count-gaussian", "Balle & Wang 2018 Thm 8", "replace-one",
                              lambda eps: gaussian_log_delta(eps, mu))]


def test_a_mechanism_defined_here_is_audited_end_to_end():
    mech = NoisyCount(sigma=1.0)
    assert "test-noisy-count" not in dpaudit.mechanisms.registered()
    result = dpaudit.audit(mech, trials=40_000, delta=1e-5, seed=3)
    (claim,) = [c for c in result.claims if c.name == "count-gaussian"]
    assert claim.applicable and claim.epsilon == pytest.approx(gaussian_epsilon(1e-5, 1.0), rel=1e-6)
    assert result.verdict == "consistent"
    assert 0 < result.epsilon_lower_bound < claim.epsilon
    assert result.canary["kind"] == "input" and result.canary["relation"] == "replace-one"
    assert result.mechanism["name"] == "test-noisy-count"
    # a claim of four times the noise is refuted (true mu = 1, claimed mu = 0.25: eps 4.38 against 0.84)
    broken = dpaudit.audit(NoisyCount(sigma=1.0, claimed_sigma=4.0), trials=40_000, delta=1e-5, seed=3)
    assert broken.verdict == "violation" and broken.epsilon_lower_bound > 0.84
    with pytest.raises(dpaudit.PrivacyViolation):
        dpaudit.assert_private(NoisyCount(sigma=1.0), epsilon=0.5, delta=1e-5, trials=40_000)


def test_a_subclass_inherits_claims_and_canaries():
    @dataclasses.dataclass(frozen=True)
    class LoudCount(NoisyCount):
        name = "test-loud-count"

    claims = LoudCount(sigma=2.0).claims()
    assert [c.name for c in claims] == ["count-gaussian"]
    assert math.isclose(claims[0].epsilon(1e-5), gaussian_epsilon(1e-5, 0.5), rel_tol=1e-6)
    assert dpaudit.audit(LoudCount(sigma=2.0), trials=5_000, seed=1).canary["kind"] == "input"
