"""Audit training code written with Opacus, many trials per call (``dpaudit.from_batched_callable``).

The user's code: one DP-SGD step of a logistic-regression model with Opacus' ``PrivacyEngine``
(per-example clipping to C, Gaussian noise of std sigma C on the sum, the whole dataset as the
batch). The neighbouring datasets differ in one record, replaced by its opposite-label twin, so
the step's sum moves by at most 2 C: the step is mu-GDP with mu = 2 / sigma, and with sigma = 2
it is (4.38, 1e-5)-DP. ``assert_private`` checks that claim against the audit and must pass; the
same code with the noise forgotten (``noise_multiplier`` 0.05) must fail.

Run: ``python examples/models/opacus_step.py`` (needs ``pip install opacus``; about a minute).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import nn

import dpaudit

FEATURES, RECORDS, CLIP, ETA = 4, 20, 1.0, 1.0


def opacus_step(noise_multiplier: float):
    """``fn(records, rng, trials)``: one Opacus DP-SGD step per trial, final weights ``(trials, 5)``."""
    from opacus import PrivacyEngine

    def fn(records: np.ndarray, rng: np.random.Generator, trials: int) -> np.ndarray:
        x = torch.as_tensor(records[:, :-1], dtype=torch.float32)
        y = torch.as_tensor(records[:, -1:], dtype=torch.float32)
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=len(x))
        rows = np.empty((trials, FEATURES + 1))
        for trial in range(trials):  # the user's code: one model per trial, as Opacus trains it
            model = nn.Linear(FEATURES, 1)
            nn.init.zeros_(model.weight), nn.init.zeros_(model.bias)  # public start point
            optimizer = torch.optim.SGD(model.parameters(), lr=ETA)
            noise = torch.Generator().manual_seed(int(rng.integers(2**63 - 1)))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # Opacus warns that secure_mode is off, torch about hooks
                private_model, private_optimizer, private_loader = PrivacyEngine().make_private(
                    module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=noise_multiplier,
                    max_grad_norm=CLIP, poisson_sampling=False, noise_generator=noise)
                for inputs, labels in private_loader:
                    private_optimizer.zero_grad()
                    nn.functional.binary_cross_entropy_with_logits(private_model(inputs), labels).backward()
                    private_optimizer.step()
            rows[trial] = torch.cat([model.weight.detach().ravel(), model.bias.detach()]).numpy()
        return rows

    return fn


def datasets() -> tuple[np.ndarray, np.ndarray]:
    """Background records and a canary far along the first feature, label 1 in S and 0 in S'."""
    rng = np.random.default_rng(0)
    background = np.hstack([0.1 * rng.standard_normal((RECORDS - 1, FEATURES)),
                            rng.integers(0, 2, (RECORDS - 1, 1))])
    canary = np.zeros(FEATURES + 1)
    canary[0] = 10.0  # its per-example gradient is clipped to norm C in either dataset
    s, s_prime = np.vstack([background, canary]), np.vstack([background, canary])
    s[-1, -1], s_prime[-1, -1] = 1.0, 0.0
    return s, s_prime


def main(trials: int = 4000) -> dict:
    pair = datasets()
    honest = dpaudit.from_batched_callable(opacus_step(noise_multiplier=2.0), FEATURES + 1, name="opacus-step")
    summary = dpaudit.assert_private(honest, epsilon=4.38, delta=1e-5, dataset_pair=pair, trials=trials)
    broken = dpaudit.from_batched_callable(opacus_step(noise_multiplier=0.05), FEATURES + 1, name="no-noise")
    try:
        dpaudit.assert_private(broken, epsilon=4.38, delta=1e-5, dataset_pair=pair, trials=trials)
        caught = False
    except dpaudit.PrivacyViolation:
        caught = True
    print(f"Opacus step with sigma = 2: certified epsilon >= {summary['epsilon_lower_bound']:.3f}, claim 4.38 "
          f"holds; with the noise forgotten the claim is {'refuted' if caught else 'NOT refuted'}")
    return {"honest": summary["epsilon_lower_bound"], "broken_caught": caught}


if __name__ == "__main__":
    main()
