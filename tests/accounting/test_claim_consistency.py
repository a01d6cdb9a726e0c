"""Every claim is valid in both directions: ``delta(epsilon(d)) <= d`` and the same applicability.

Over every registered mechanism, seeded random parameters (some violating
the claims' assumptions on purpose), several canary positions and deltas.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from dpaudit import mechanisms
from dpaudit.core.errors import ParameterError

DELTAS = (1e-8, 1e-5, 1e-3, 0.05)


def _parameters(name: str, rng: np.random.Generator) -> dict:
    pick = lambda *values: values[int(rng.integers(len(values)))]  # noqa: E731
    sigma = float(rng.choice([0.3, 1.0, 3.0]))
    if name == "gaussian":
        return {"sigma": sigma, "sensitivity": pick(0.5, 1.0, 2.0)}
    if name == "laplace":
        return {"scale": sigma, "sensitivity": pick(0.5, 1.0)}
    if name == "shuffled-rr":
        return {"n": pick(10, 50, 200, 2000, 20000), "epsilon0": pick(0.5, 1.0, 3.0, 6.0)}
    if name == "projected-kernel":
        noise = pick("gaussian", "laplace")
        params = {"n": pick(1, 5, 20), "dim": 1, "noise": noise, "step": pick("translation", "contraction", "reset"),
                  "contraction": 0.5, "domain": pick("whole", "box", "ball")}
        params.update({"sigma": sigma} if noise == "gaussian" else {"sigma": None, "scale": sigma})
        return params
    common = {"n": pick(2, 10, 50), "dim": pick(1, 3), "eta": pick(0.05, 0.5, 3.0),
              "domain": pick("whole", "ball", "box"), "loss": pick("linear", "logistic", "quadratic", "huber")}
    if name in ("pnsgd", "multi-epoch-pnsgd"):
        noise = pick("gaussian", "laplace") if common["dim"] == 1 else "gaussian"
        common.update({"sigma": sigma} if noise == "gaussian" else {"sigma": None, "scale": sigma, "domain": "box"})
        common["noise"] = noise
        if name == "pnsgd":
            common["variant"] = pick("plain", "skip", "stop")
        else:
            common["epochs"] = pick(1, 3)
        return common
    common.update({"batch_size": 2, "steps": pick(1, 20), "noise_std": sigma / 2,
                   "sampling": pick("poisson", "without-replacement")})
    if name == "dp-lssgd":
        common["smoothing"] = pick(0.0, 1.0)
    return common


def _cases():
    rng = np.random.default_rng(2026)
    for name in sorted(mechanisms.registered()):
        for _ in range(4):
            params = _parameters(name, rng)
            try:
                mech = mechanisms.make(name, **params)
            except ParameterError:
                continue  # an invalid combination: nothing to check
            yield pytest.param(mech, id=f"{name}-{zlib.crc32(repr(sorted(params.items())).encode())}")
    for n in (10, 50, 200, 2000):  # the shuffle theorem's range of validity, on both sides of its edge
        for epsilon0 in (1.0, 3.0):
            yield pytest.param(mechanisms.make("shuffled-rr", n=n, epsilon0=epsilon0), id=f"shuffled-rr-{n}-{epsilon0}")


@pytest.mark.parametrize("mech", list(_cases()))
def test_claims_agree_in_both_modes(mech):
    indices = [None] + ([1, mech.n_records] if mech.has_positions else [])
    for index in indices:
        for claim in mech.claims(index=index):
            for delta in DELTAS:
                entry = claim.evaluate(delta=delta).to_dict()
                if not entry["applicable"] or entry["epsilon"] is None:
                    continue
                epsilon = entry["epsilon"]
                back = claim.evaluate(epsilon=epsilon).to_dict()
                assert back["applicable"], (claim.name, index, delta, back["reason"])
                # rounding of the two numerical inversions: 1e-6 relative
                assert back["delta"] <= delta * (1 + 1e-6) + 1e-15, (claim.name, index, delta, epsilon, back)
            for epsilon in (0.1, 1.0, 2.5, 4.0):
                entry = claim.evaluate(epsilon=epsilon).to_dict()
                if not entry["applicable"] or not 0.0 < entry["delta"] < 1.0:
                    continue
                forth = claim.evaluate(delta=entry["delta"]).to_dict()
                assert forth["applicable"], (claim.name, index, epsilon, forth["reason"])
                assert forth["epsilon"] is not None and forth["epsilon"] <= epsilon * (1 + 1e-6) + 1e-9, (
                    claim.name, index, epsilon, entry["delta"], forth)


def test_shuffle_claim_outside_its_range_is_not_applicable_in_either_mode():
    # n = 200, eps0 = 3: no delta < 1 satisfies eps0 <= log(n / (16 log(2/delta)))
    mech = mechanisms.make("shuffled-rr", n=200, epsilon0=3.0)
    (shuffle,) = [c for c in mech.claims() if c.name == "shuffle-amplification"]
    assert not shuffle.evaluate(epsilon=2.5).to_dict()["applicable"]
    assert not shuffle.evaluate(delta=1e-5).to_dict()["applicable"]
    assert math.isfinite(shuffle.epsilon(0.5))  # the bare function still computes; evaluate() guards it


def _exact_cases():
    """Instances with an exact last-iterate value (``accounting.last_iterate``) or a propagated one (``exact1d``)."""
    rng = np.random.default_rng(24)
    for _ in range(6):
        name = str(rng.choice(["dp-sgd", "dp-lssgd"]))
        params = {"n": int(rng.choice([10, 50])), "dim": int(rng.choice([1, 3])), "domain": "whole",
                  "batch_size": int(rng.choice([1, 5])), "steps": int(rng.choice([1, 10, 40])),
                  "eta": 0.5, "noise_std": float(rng.choice([0.1, 0.5])),
                  "sampling": str(rng.choice(["poisson", "without-replacement"]))}
        if name == "dp-lssgd":
            params["smoothing"] = 1.0
        # Poisson claims are add/remove: the zero pair; without replacement, replace-one: either pair
        pair = "zero" if params["sampling"] == "poisson" else str(rng.choice(["zero", "opposite"]))
        yield pytest.param(name, params, pair, id=f"{name}-{pair}-{zlib.crc32(repr(sorted(params.items())).encode())}")
    for name, extra in (("pnsgd", {}), ("multi-epoch-pnsgd", {"epochs": 3}), ("multi-epoch-pnsgd", {"epochs": 12})):
        for dim, domain in ((3, "whole"), (1, "whole"), (1, "box")):
            params = {"n": 10, "dim": dim, "domain": domain, "eta": 0.2, "sigma": 1.0, **extra}
            yield pytest.param(name, params, "opposite", id=f"{name}-{dim}-{domain}-{extra}")


@pytest.mark.parametrize("name,params,pair_kind", list(_exact_cases()))
def test_no_claim_is_below_the_exact_value_of_its_instance(name, params, pair_kind):
    """Every applicable upper bound for the pair's relation is at least the instance's exact epsilon."""
    from dpaudit.attacks.canaries import CanarySpec
    from dpaudit.mechanisms.accounting.instances import exact_epsilon

    mech = mechanisms.make(name, **params)
    compared = 0
    positions = [mech.n_records] if name.startswith("dp-") else [1, mech.n_records]  # batches have no order
    for index in positions:
        pair = CanarySpec(kind="gradient", pair=pair_kind).build(mech, index)
        for delta in DELTAS:
            exact = exact_epsilon(mech, pair.dataset_a, pair.dataset_b, delta)
            if not math.isfinite(exact):
                continue  # beyond the accountant's search range: no exact value is reported
            for claim in mech.claims(index=index):
                entry = claim.evaluate(delta=delta).to_dict()
                if (not entry["applicable"] or entry["epsilon"] is None or entry["kind"] != "upper-bound"
                        or entry["relation"] != pair.relation):
                    continue
                # the exact value's stated error is 1e-12 (mixture) or its grid error (exact1d, below 1e-3 here)
                assert entry["epsilon"] >= exact * (1 - 1e-3) - 1e-9, (claim.name, index, delta, entry["epsilon"], exact)
                compared += 1
    assert compared > 0  # every instance meets at least one applicable claim
