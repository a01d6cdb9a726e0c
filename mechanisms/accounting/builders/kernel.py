"""Claims of the projected kernel (a contractive noisy iteration), per index.

Neighbouring datasets differ in the shift ``u_t`` of one record (replace-one;
the reset flags are public), so the canary's maps differ by at most
``2 * shift``. Later steps are ``rho``-Lipschitz (resets only contract more,
so treating every later step as ``rho``-Lipschitz is an upper bound).
"""

from __future__ import annotations

import numpy as np

from dpaudit.mechanisms.accounting import contraction as egamma
from dpaudit.mechanisms.accounting import iteration
from dpaudit.mechanisms.accounting.builders.builder import ClaimBuilder
from dpaudit.mechanisms.accounting.claims import Claim, not_applicable, profile_claim, rdp_claim
from dpaudit.mechanisms.accounting.descriptions import KernelIteration
from dpaudit.mechanisms.accounting.rdp import DEFAULT_ORDERS

REPLACE = "replace-one"
THM22 = ("Feldman et al. 2018, Thm 22 (shift reduction, optimal schedule with contraction factors), "
         "converted by CKS Prop. 12")
PROP1 = "Asoodeh, Diaz, Calmon, Thm 3 and Prop. 1 (projected Gaussian kernel contraction)"
LAPLACE = "Asoodeh, Diaz, Calmon, Thm 3 with the Laplace profile (docs/theory.md 2.5 [derived])"


def kernel_claims(mech: KernelIteration, index: int | None) -> list[Claim]:
    """The per-index claims of a contractive noisy iteration (``index=None``: the last position)."""
    t = mech.n if index is None else int(index)
    diameter = mech.region.diameter
    rho = mech.rho
    if mech.noise == "laplace":
        claims = [not_applicable(name, cite, REPLACE, "assumes Gaussian noise, got noise='laplace'", t)
                  for name, cite in (("pabi-shift-reduction", THM22), ("contraction-egamma", PROP1))]
        if mech.dim != 1 or mech.region.kind != "box":
            claims.append(not_applicable(
                "contraction-laplace", LAPLACE, REPLACE,
                f"the Laplace bound needs K an interval (dim=1, domain='box'), "
                f"got dim={mech.dim}, domain={mech.region.kind!r}", t))
            return claims
        eps_shift = 2 * mech.shift / mech.spread
        eps_diameter = rho * diameter / mech.spread
        claims.append(profile_claim(
            "contraction-laplace", LAPLACE, REPLACE,
            lambda e: egamma.laplace_index_log_delta(e, n=mech.n, index=t, epsilon_shift=eps_shift,
                                                     epsilon_diameter=eps_diameter), t))
        return claims
    shifts = np.zeros(mech.n - t + 1)
    shifts[0] = 2 * mech.shift
    contraction = np.full(shifts.shape, rho)
    rdp = iteration.shift_reduction_rdp(DEFAULT_ORDERS, shifts, mech.spread, contraction)
    claims = [rdp_claim("pabi-shift-reduction", THM22, REPLACE, DEFAULT_ORDERS, rdp, t)]
    shift_ratio = 2 * mech.shift / mech.spread
    diameter_ratio = rho * diameter / mech.spread if rho > 0 else 0.0
    claims.append(profile_claim(
        "contraction-egamma", PROP1, REPLACE,
        lambda e: egamma.gaussian_index_log_delta(e, n=mech.n, index=t, shift_ratio=shift_ratio,
                                                  diameter_ratio=diameter_ratio), t))
    return claims


BUILDERS = (ClaimBuilder("kernel-iteration", (KernelIteration,), kernel_claims),)
