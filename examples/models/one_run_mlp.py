"""A one-run audit of a small MLP trained by DP-SGD on scikit-learn's digits data, with 1,000 canaries.

One training run, not thousands: 1,000 gradient canaries (random unit directions in parameter space,
norm C) take the places of 1,000 records; each is included with probability 1/2, drawn before the
run (an excluded canary contributes a zero gradient, which under Poisson sampling is the same as no
record). After training, a canary's score is how far the parameters moved against its direction;
included canaries move them more. The one-run estimator (f-DP, Mahloujifar et al. 2024) certifies a
lower bound on epsilon from those 1,000 scores, printed beside the accountant's claim.

Run: ``python examples/models/one_run_mlp.py`` (needs ``pip install 'dpaudit[models]'``; about 30 s).
The same design without the recipe, with claims, store and reports: ``dpaudit.audit(mech, design="one-run",
canaries=1000)``, or ``[audit] design = "one-run"`` in a config (``examples/models/cnn/one_run.toml``).
"""

from __future__ import annotations

import numpy as np

import dpaudit
from dpaudit.auditing.statistics.one_run_fdp import one_run_audit

CANARIES, DELTA = 1000, 1e-5


def main(seed: int = 0, steps: int = 300) -> dict:
    mech = dpaudit.make("model", model="mlp", data="digits", hidden=16, steps=steps, batch_size=512,
                        sampling="poisson", clip=1.0, noise_multiplier=0.6, eta=1.0)
    rng = np.random.default_rng(seed)
    positions = rng.choice(mech.n_records, CANARIES, replace=False) + 1
    directions = rng.standard_normal((CANARIES, mech.parameter_count))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    included = rng.integers(0, 2, CANARIES)
    data = mech.default_dataset()
    for position, direction, bit in zip(positions, directions, included):
        data = data.inject(int(position), mech.clip * direction * bit)  # zero gradient: not included
    final = mech.sample(data, trials=1, seed=seed + 1)[0]
    scores = directions @ (mech.initial_parameters - final)  # steps subtract the canary's gradient
    audit = one_run_audit(scores, included, delta=DELTA)
    claim = next(c for c in mech.claims() if c.applicable)
    row = {"canaries": CANARIES, "epsilon_lower_bound": audit.epsilon_lower_bound,
           "guesses": audit.guesses, "correct": audit.correct, "claim": claim.name,
           "claim_epsilon": claim.epsilon(DELTA)}
    print(f"one run, {CANARIES} canaries: epsilon >= {audit.epsilon_lower_bound:.3f} at delta {DELTA:g} "
          f"(confidence 0.95; {audit.correct} of {audit.guesses} guesses right); "
          f"claim {claim.name}: epsilon <= {row['claim_epsilon']:.3f}")
    return row


if __name__ == "__main__":
    main()
