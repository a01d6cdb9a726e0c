"""Claims of a noisy query (Gaussian, Laplace) and of shuffled randomized response, from their descriptions."""

from __future__ import annotations

import math

import numpy as np

from dpaudit.mechanisms.accounting.builders.builder import ClaimBuilder
from dpaudit.mechanisms.accounting.claims import Claim, delta_for_epsilon, not_applicable, profile_claim
from dpaudit.mechanisms.accounting.descriptions import NoisyQuery, ShuffledRandomizedResponse
from dpaudit.mechanisms.accounting.profiles import gaussian_log_delta, laplace_delta, laplace_epsilon
from dpaudit.mechanisms.accounting.shuffle_exact import (
    MAX_USERS,
    clones_delta,
    clones_epsilon,
    shuffled_rr_delta,
    shuffled_rr_epsilon,
)
from dpaudit.mechanisms.accounting.subsampling import shuffle_epsilon, shuffle_max_local_epsilon

BALLE_WANG = "Balle & Wang 2018, Thm 8 (exact Gaussian profile)"
LAPLACE = "Laplace profile [1 - exp((eps - eps0)/2)]_+ (docs/theory.md 2.1, derived)"


def noisy_query_claims(query: NoisyQuery, index: int | None) -> list[Claim]:
    """The exact profile of a query plus Gaussian or Laplace noise, for each relation it states a sensitivity
    for."""
    claims = []
    for relation, sensitivity in query.sensitivities:
        if query.noise == "gaussian":
            mu = sensitivity / query.spread
            claims.append(profile_claim("gaussian-exact", BALLE_WANG, relation,
                                        lambda e, mu=mu: gaussian_log_delta(e, mu)))
        else:  # L1 sensitivity over scale (the L1 norm adds the coordinates' shifts)
            eps0 = sensitivity / query.spread
            claims.append(Claim("laplace-exact", LAPLACE, relation,
                                epsilon_fn=lambda d, e0=eps0: float(laplace_epsilon(d, e0)),
                                delta_fn=lambda e, e0=eps0: float(laplace_delta(e, e0)), covers_delta_zero=True))
    return claims


def _rr_log_delta(epsilon0: float):
    keep = 1.0 / (1.0 + math.exp(-epsilon0))

    def log_delta(eps):
        # E_{e^eps} between (p, 1-p) and (1-p, p): [p - e^eps (1 - p)]_+
        with np.errstate(divide="ignore"):
            return np.log(np.maximum(keep - np.exp(np.asarray(eps)) * (1 - keep), 0.0))
    return log_delta


def shuffled_rr_claims(mech: ShuffledRandomizedResponse, index: int | None) -> list[Claim]:
    local = profile_claim(
        "local-randomized-response",
        "randomized response profile; the shuffle is post-processing of the reports",
        "replace-one", _rr_log_delta(mech.epsilon0), pure_epsilon=mech.epsilon0)

    # Thm 3.1 holds at delta only when eps0 <= log(n / (16 log(2/delta))), i.e. delta >= delta_min
    delta_min = 2.0 * math.exp(-mech.n / (16.0 * math.exp(mech.epsilon0)))

    def condition(epsilon, delta):
        if delta is None:  # delta(eps) mode: some delta in [delta_min, 1) must be allowed
            if delta_min < 1.0:
                return None
            return (f"epsilon0 > log(n / (16 log(2/delta))) for every delta < 1 "
                    f"(epsilon0={mech.epsilon0}, n={mech.n})")
        limit = shuffle_max_local_epsilon(n=mech.n, delta=delta)
        if mech.epsilon0 > limit:
            return (f"epsilon0 > log(n / (16 log(2/delta))) = {limit:.4g} "
                    f"(epsilon0={mech.epsilon0}, n={mech.n}, delta={delta})")
        return None

    def shuffle_bound(delta: float) -> float:
        return shuffle_epsilon(epsilon0=mech.epsilon0, n=mech.n, delta=delta)

    def shuffle_delta(epsilon: float) -> float:
        # the smallest delta the theorem may be applied at that still gives epsilon
        return max(delta_for_epsilon(shuffle_bound, epsilon, iterations=80), delta_min)

    shuffle = Claim(
        "shuffle-amplification",
        "Feldman, McMillan, Talwar 2021, Thm 3.1, explicit constants (docs/theory.md 2.7 [check])",
        "replace-one", epsilon_fn=shuffle_bound, delta_fn=shuffle_delta, condition=condition)
    clones = Claim(
        "shuffle-clones-numerical",
        "Feldman, McMillan, Talwar 2021, Thm 3.2 evaluated numerically, any eps0-LDP randomizer "
        "(docs/theory.md 2.7)", "replace-one",
        epsilon_fn=lambda d: clones_epsilon(d, n=mech.n, epsilon0=mech.epsilon0),
        delta_fn=lambda e: clones_delta(e, n=mech.n, epsilon0=mech.epsilon0))
    return [local, shuffle, clones, _shuffled_rr_exact(mech)]


def _shuffled_rr_exact(mech: ShuffledRandomizedResponse) -> Claim:
    """The mechanism's exact profile: the count of ones enumerated, worst case over the other users' bits."""
    name = "shuffled-rr-exact"
    citation = "count of ones enumerated, worst case over the other users' bits (docs/theory.md 2.7)"
    if mech.n > MAX_USERS:
        return not_applicable(name, citation, "replace-one",
                              f"the enumeration is evaluated for n <= {MAX_USERS} users, got n={mech.n}")
    return Claim(name, citation, "replace-one",
                 epsilon_fn=lambda d: shuffled_rr_epsilon(d, n=mech.n, epsilon0=mech.epsilon0),
                 delta_fn=lambda e: shuffled_rr_delta(e, n=mech.n, epsilon0=mech.epsilon0))



BUILDERS = (
    ClaimBuilder("noisy-query", (NoisyQuery,), noisy_query_claims, per_index=False),
    ClaimBuilder("shuffled-randomized-response", (ShuffledRandomizedResponse,), shuffled_rr_claims,
                 per_index=False),
)
