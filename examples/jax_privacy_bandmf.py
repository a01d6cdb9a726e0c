"""A jax_privacy BandMF training audited as it is called (``dpaudit.from_jax_privacy``).

The user's code: linear regression (8 parameters, 32 records, batches of 8 in fixed cyclic order, 2 epochs),
per-example gradients clipped by ``clipping.clipped_grad``, jax_privacy's ``matrix_factorization_privatizer``
with a column-normalised banded strategy of 2 bands (noise multiplier 1, scaled as
``BandMFExecutionPlanConfig`` scales it), then the mean and optax SGD; the final parameters are released. A
canary record with a large residual sits at the worst participation pattern, against a zero record
(zero-out, jax_privacy's relation). The same training with a linear loss is audited too: its last iterate has
an exact value (``mf-last-iterate``), whose ideal audit at these trials is printed beside the bound.

Run: ``python examples/jax_privacy_bandmf.py`` (needs ``pip install -e ".[jax]"``; about a minute on two
cores, 10^5 trials per side). docs/guide.md ("Correlated noise") quotes its figures.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax_privacy import clipping, noise_addition
from jax_privacy.matrix_factorization import banded

import dpaudit
from dpaudit.auditing.statistics.ceiling import gaussian_ceiling
from dpaudit.mechanisms.accounting.builders.matrix import last_iterate_mu
from dpaudit.mechanisms.adapters import from_jax_privacy

DIM, RECORDS, BATCH, EPOCHS, BANDS, CLIP, NOISE_MULTIPLIER, LR = 8, 32, 8, 2, 2, 1.0, 1.0, 1.0
PERIOD = RECORDS // BATCH
STEPS = PERIOD * EPOCHS  # 4 batches an epoch, 8 steps
STRATEGY = banded.ColumnNormalizedBanded.default(STEPS, BANDS)
STDDEV = NOISE_MULTIPLIER * CLIP * float(jnp.linalg.norm(STRATEGY.materialize(), axis=0).max())
TRIALS, DELTA = 100_000, 1e-5


def make_training(loss_name: str):
    """The user's training: ``train(key, records) -> final parameters``, every draw from ``key``."""
    def loss(weights, record):  # record: (1, DIM + 1); clipped_grad keeps the batch axis
        features, target = record[:, :DIM], record[:, DIM]
        if loss_name == "squares":
            return jnp.sum((features @ weights - target) ** 2)
        return -jnp.sum(features @ weights)

    gradient = clipping.clipped_grad(loss, l2_clip_norm=CLIP, batch_argnums=1)
    order = jnp.arange(RECORDS).reshape(PERIOD, BATCH)[jnp.arange(STEPS) % PERIOD]

    def train(key, records):
        privatizer = noise_addition.matrix_factorization_privatizer(STRATEGY.inverse_as_streaming_matrix(),
                                                                    stddev=STDDEV, prng_key=key)
        optimizer = optax.chain(privatizer, optax.scale(1.0 / BATCH), optax.sgd(LR))

        def step(carry, rows):
            weights, state = carry
            update, state = optimizer.update(gradient(weights, records[rows]), state, weights)
            return (optax.apply_updates(weights, update), state), None

        weights = jnp.zeros(DIM)
        return jax.lax.scan(step, (weights, optimizer.init(weights)), order)[0][0]

    train.__qualname__ = f"train_{loss_name}"
    return train


def main() -> None:
    rng = np.random.default_rng(0)
    features = rng.normal(size=(RECORDS, DIM))
    records = np.column_stack([features, features @ np.linspace(-1, 1, DIM) + 0.1 * rng.normal(size=RECORDS)])
    canary = np.concatenate([np.eye(DIM)[0] * 3.0, [30.0]])  # a large residual: its gradient is clipped to CLIP
    for loss_name in ("squares", "linear"):
        start = time.perf_counter()
        training = from_jax_privacy(make_training(loss_name), records=records, steps=STEPS, epochs=EPOCHS,
                                    clip_norm=CLIP, stddev=STDDEV, noising_matrix=STRATEGY.inverse_as_streaming_matrix(),
                                    strategy=STRATEGY, canary=canary, linear_sgd=loss_name == "linear")
        result = dpaudit.audit(training, trials=TRIALS, delta=DELTA, seed=0)
        seconds = time.perf_counter() - start
        claims = {(entry.name, str(entry.relation)): entry for entry in result.claims}

        def claim(name: str) -> str:
            entry = claims[name, "zero-out"]
            return f"{entry.epsilon:.4f}" if entry.applicable else "not applicable"

        print(f"{loss_name} loss: {result.verdict}, certified epsilon >= {result.epsilon_lower_bound:.3f} "
              f"({result.attack['score']}, canary index {training.default_index}, {seconds:.0f} s)")
        print(f"  jax-privacy {claim('jax-privacy')}, mf-releases {claim('mf-releases')}, "
              f"mf-last-iterate {claim('mf-last-iterate')}")
        if loss_name == "linear":
            mu = last_iterate_mu(training.matrix_description)
            certified = result.to_dict()["empirical"]["epsilon"]["trials"]["a"]
            print(f"  the last iterate's ideal audit (mu {mu:.4f}, {certified} certification trials): "
                  f"{gaussian_ceiling(mu, trials=certified, delta=DELTA):.3f}")


if __name__ == "__main__":
    main()
