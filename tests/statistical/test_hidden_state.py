"""A loss that is not convex defeats amplification by iteration; a convex one does not (docs/theory.md 10)."""

from __future__ import annotations

from dpaudit import mechanisms
from dpaudit.attacks.canaries import CanarySpec
from dpaudit.auditing.jobs.api import audit

# One canary gradient at step 1 of 50, z = s m / L = 1: a convex (linear) loss hides it behind the 49 later
# steps' noise (amplification by iteration claims mu_eq = 1 / sqrt(50) = 0.141, epsilon 0.546 at 1e-5); the
# concave loss multiplies theta by a = 1.5 per step, so the step-1 difference outgrows every later noise and the
# last iterate keeps mu = sqrt(1 - 1/a^2) = 0.745 of the step's 1 (exact epsilon 3.12).
PARAMS = {"n": 10, "batch_size": 10, "steps": 50, "noise_std": 0.1}
TRIALS = 2_000


def _run(loss: str, **extra):
    mech = mechanisms.make("dp-sgd", **PARAMS, loss=loss, **extra)
    result = audit(mech, canary=CanarySpec(steps=(1,)), trials=TRIALS, seed=0, workers=1)
    return result, {claim.name: claim for claim in result.claims}


def test_the_concave_loss_certifies_above_what_amplification_would_claim_for_a_convex_one():
    convex, convex_claims = _run("linear")
    claimed = convex_claims["scheduled-amplification"]
    assert claimed.applicable
    concave, concave_claims = _run("concave", smoothness=5.0)
    # Sampling error: at 2000 trials per dataset the statistical ceiling of the concave instance is 1.30 (the
    # most any test certifies at 95%); 0.546 is well under half of it, so with the fixed seed the certified
    # bound (1.36 here) is far from the claim in either direction.
    assert concave.empirical.epsilon_lower_bound > claimed.epsilon
    marked = concave_claims["scheduled-amplification"]
    assert not marked.applicable and "not convex" in marked.reason and "steps expand" in marked.reason
    assert concave_claims["scheduled-composition"].applicable
    assert concave.empirical.epsilon_lower_bound <= concave_claims["scheduled-composition"].epsilon
    # The convex loss stays below the theorem's value: its exact value (0.497) is below it, so a certified
    # bound above it would be a false certification (probability <= 5% for any seed; this seed: 0).
    assert convex.empirical.epsilon_lower_bound <= claimed.epsilon
    assert convex.verdict != "violation"


def test_pnsgd_with_the_concave_loss_certifies_above_its_amplification_claim_for_a_convex_loss():
    # The seeds' central theorem on its own mechanism: PNSGD, n = 20, sigma = 1, eta = 0.1, the whole space, the
    # canary at index 1 (19 later steps). Linear loss: pabi-rdp claims 1.91 at 1e-5 (exact value 1.76). Concave
    # loss (a = 1.5 per step): the first step's difference outgrows the later noise. At 2000 trials per dataset
    # the certified bound is 2.66 for this seed (2.49 to 2.85 over seeds 0-3, a spread of about 0.15): 1.91 is
    # about 4 spreads below it. The concave instance's exact value is 7.00 and local-rdp (10.7) still holds.
    params = {"n": 20, "eta": 0.1, "sigma": 1.0, "domain": "whole"}
    linear = mechanisms.make("pnsgd", **params)
    claimed = {claim.name: claim for claim in audit(linear, canary={"index": 1}, trials=TRIALS, seed=0,
                                                     workers=1).claims}
    concave = audit(mechanisms.make("pnsgd", **params, loss="concave", smoothness=5.0), canary={"index": 1},
                    trials=TRIALS, seed=0, workers=1)
    marked = {claim.name: claim for claim in concave.claims}
    assert claimed["pabi-rdp"].applicable
    assert concave.empirical.epsilon_lower_bound > claimed["pabi-rdp"].epsilon
    assert not marked["pabi-rdp"].applicable and "not convex" in marked["pabi-rdp"].reason
    assert concave.empirical.epsilon_lower_bound <= marked["exact-instance"].epsilon <= marked["local-rdp"].epsilon
