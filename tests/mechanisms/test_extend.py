"""Adding a mechanism means adding one class with a sampler and a description: this file defines one and audits it.

Nothing else in dpaudit knows about ``NoisyCount``: it brings its own
parameters, sampler, canary records and a frozen description of what it does
(``accounting.descriptions.NoisyQuery``); every claim comes from the
accountants' builders for that description, and it is never registered.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

import dpaudit
from dpaudit.core.validation import check_real
from dpaudit.mechanisms.accounting.descriptions import NoisyQuery
from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon
from dpaudit.mechanisms.base import Mechanism
from dpaudit.mechanisms.dataset import Dataset


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

    @property
    def privacy_description(self) -> NoisyQuery:
        # a count of bits moves by 1 when a record is replaced (or added, or removed)
        return NoisyQuery("gaussian", self.claimed_sigma or self.sigma, (("replace-one", 1.0), ("add-remove", 1.0)))


def test_a_mechanism_defined_here_is_audited_end_to_end():
    mech = NoisyCount(sigma=1.0)
    assert "test-noisy-count" not in dpaudit.mechanisms.registered()
    result = dpaudit.audit(mech, trials=40_000, delta=1e-5, seed=3)
    # the claims come from the description alone: the exact Gaussian profile, mu = 1, for both relations
    assert [(c.name, c.relation) for c in mech.claims()] == [("gaussian-exact", "replace-one"),
                                                             ("gaussian-exact", "add-remove")]
    (claim,) = [c for c in result.claims if c.name == "gaussian-exact" and c.relation == "replace-one"]
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
    assert [c.name for c in claims] == ["gaussian-exact", "gaussian-exact"]
    assert math.isclose(claims[0].epsilon(1e-5), gaussian_epsilon(1e-5, 0.5), rel_tol=1e-6)
    assert dpaudit.audit(LoudCount(sigma=2.0), trials=5_000, seed=1).canary["kind"] == "input"


def test_a_description_no_builder_supports_is_refused():
    """A mechanism whose description no builder supports fails loudly, never with an empty list of claims."""
    from dpaudit.mechanisms.accounting.builders import UnsupportedDescription
    from dpaudit.mechanisms.accounting.descriptions import PrivacyDescription

    @dataclasses.dataclass(frozen=True)
    class Unknown(PrivacyDescription):
        noise_std: float = 1.0

    @dataclasses.dataclass(frozen=True)
    class Undescribed(NoisyCount):
        @property
        def privacy_description(self) -> PrivacyDescription:
            return Unknown()

    with pytest.raises(UnsupportedDescription, match="no claim builder supports a Unknown description"):
        Undescribed().claims()
