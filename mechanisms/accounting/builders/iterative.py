"""Claims of PNSGD (plain, skip, stop; Gaussian or Laplace noise) and multi-epoch PNSGD.

Replace-one at index ``t`` (1-based). Each claim checks the assumptions of
its theorem and says why it does not apply otherwise.
"""

from __future__ import annotations

import math

import numpy as np

from dpaudit.mechanisms.accounting import contraction as egamma
from dpaudit.mechanisms.accounting import iteration
from dpaudit.mechanisms.accounting.builders.builder import ClaimBuilder
from dpaudit.mechanisms.accounting.claims import (
    Claim,
    not_applicable,
    profile_claim,
    rdp_claim,
)
from dpaudit.mechanisms.accounting.descriptions import MultiEpochNoisySgd, ProjectedNoisySgd
from dpaudit.mechanisms.accounting.rdp import DEFAULT_ORDERS

REPLACE = "replace-one"
THM23 = "Feldman et al. 2018, Thm 23 (per index), converted by Canonne-Kamath-Steinke 2020 Prop. 12"
THM24 = "Feldman et al. 2018, Thm 24 (Skip-PNSGD), converted by Canonne-Kamath-Steinke 2020 Prop. 12"
THM26 = "Feldman et al. 2018, Thm 26 (Stop-PNSGD, orders alpha <= alpha*), converted by CKS Prop. 12"
LEMMA27 = "Feldman et al. 2018, Lemma 27 (local privacy), converted by CKS Prop. 12"
STRONG = ("Feldman et al. Thm 22 with c-Lipschitz steps, c^2 = 1 - 2 eta beta lambda/(beta+lambda) "
          "(Asoodeh et al. Lemma 4; docs/theory.md 2.4 [derived])")
THM4 = "Asoodeh, Diaz, Calmon, Thm 4 (E_gamma contraction, per index)"
THM5 = "Asoodeh, Diaz, Calmon, Thm 5, eq. (17) with the maximum over the index (docs/theory.md 2.5)"
LAPLACE_THM3 = "Asoodeh, Diaz, Calmon, Thm 3 with the Laplace profile (docs/theory.md 2.5 [derived])"
MULTI = "Feldman et al. 2018, proof of Thm 35 (per index, E epochs; docs/theory.md 2.4 [derived])"
THM35 = "Feldman et al. 2018, Thm 35 (E <= n epochs), converted by CKS Prop. 12"
BOUNDED = "Altschuler & Talwar 2022 technique (bounded domain, many epochs; docs/theory.md 2.4 [check])"
LOCAL_COMPOSED = "Feldman et al. 2018, Lemma 27 composed over E epochs, converted by CKS Prop. 12"


class Assumptions:
    """The constants and assumption checks shared by the PNSGD claims."""

    def __init__(self, mech) -> None:
        loss = mech.loss
        self.mech = mech
        self.L = loss.lipschitz
        self.beta = loss.smoothness
        self.lam = loss.strong_convexity
        self.diameter = mech.region.diameter
        self.smooth = self.beta == 0 or mech.eta <= 2 / self.beta + 1e-15
        self.lipschitz_reason = "" if math.isfinite(self.L) else (
            f"the {loss.name} loss is not Lipschitz on K (domain={mech.region.kind!r})")
        self.smooth_reason = "" if self.smooth else (
            f"eta > 2/beta: the gradient step is not 1-Lipschitz (eta={mech.eta}, beta={self.beta:.6g})")
        self.gaussian_reason = "" if mech.noise == "gaussian" else (
            "the bound assumes Gaussian noise, got noise='laplace'")

    def first_reason(self, *reasons: str) -> str:
        return next((r for r in reasons if r), "")

    @property
    def psi_ratio(self) -> float:
        """Shift of the canary's step over its noise std: ``2 eta L / (eta sigma)``."""
        return 2 * self.L / self.mech.spread

    @property
    def diameter_ratio(self) -> float:
        """``D_j / sigma_j`` with ``D_j = diam(K)`` (smooth) or ``diam(K) + 2 eta L`` (Asoodeh Thm 4)."""
        m = self.mech
        diameter = self.diameter if self.smooth else self.diameter + 2 * m.eta * self.L
        return diameter / (m.eta * m.spread)


#: Claims that compose the canary's own steps and need no contraction: they hold for any loss.
COMPOSITION_CLAIMS = ("local-rdp", "local-rdp-composed")


def without_contraction(mech, claims: list[Claim]) -> list[Claim]:
    """For a loss that is not (known to be) convex, every claim but :data:`COMPOSITION_CLAIMS` marked not
    applicable with the reason: amplification by iteration and E_gamma contraction need contractive steps
    (docs/theory.md 10.4)."""
    loss = mech.loss
    if loss.own:
        reason = f"loss={mech.loss.label!r} is a loss of your own, not known to be convex and smooth (steps may expand)"
    elif loss.strong_convexity < 0:
        reason = (f"the {loss.name} loss is not convex: each step multiplies w by 1 + eta beta = "
                  f"{1 + mech.eta * loss.smoothness:.6g} > 1, so steps expand and the contraction the bound "
                  f"needs fails (docs/theory.md 10.4)")
    else:
        return claims
    return [claim if claim.name in COMPOSITION_CLAIMS
            else not_applicable(claim.name, claim.citation, claim.relation, reason, claim.index) for claim in claims]


def pnsgd_claims(mech: ProjectedNoisySgd, index: int | None) -> list[Claim]:
    """Per-index claims of one pass of PNSGD (``index=None``: the last position)."""
    return without_contraction(mech, _pnsgd_claims(mech, index))


def _pnsgd_claims(mech, index):
    a = Assumptions(mech)
    t = mech.n if index is None else int(index)
    if mech.noise == "laplace":
        return _laplace_claims(mech, a, t)
    claims: list[Claim] = []
    base_reason = a.first_reason(a.lipschitz_reason)
    if mech.variant in ("plain", "skip"):
        name, cite = ("pabi-rdp", THM23) if mech.variant == "plain" else ("pabi-rdp-skip", THM24)
        reason = a.first_reason(base_reason, a.smooth_reason)
        if reason:
            claims.append(not_applicable(name, cite, REPLACE, reason, t))
        else:
            rdp = iteration.pnsgd_index_rdp(DEFAULT_ORDERS, n=mech.n, index=t, lipschitz=a.L, sigma=mech.spread)
            claims.append(rdp_claim(name, cite, REPLACE, DEFAULT_ORDERS, rdp, t))
        claims.append(_strongly_convex(mech, a, t))
        if base_reason:
            claims.append(not_applicable("contraction-egamma", THM4, REPLACE, base_reason, t))
        else:
            claims.append(profile_claim(
                "contraction-egamma", THM4, REPLACE,
                lambda e: egamma.gaussian_index_log_delta(
                    e, n=mech.n, index=t, shift_ratio=a.psi_ratio, diameter_ratio=a.diameter_ratio),
                t))
    else:
        claims.extend(_stop_claims(mech, a))
    if base_reason:
        claims.append(not_applicable("local-rdp", LEMMA27, REPLACE, base_reason))
    else:
        claims.append(rdp_claim("local-rdp", LEMMA27, REPLACE, DEFAULT_ORDERS,
                                iteration.local_rdp(DEFAULT_ORDERS, lipschitz=a.L, sigma=mech.spread)))
    return claims


def _strongly_convex(mech, a: Assumptions, t: int) -> Claim:
    name = "pabi-rdp-strongly-convex"
    if a.lam <= 0:
        return not_applicable(name, STRONG, REPLACE, f"the {mech.loss.label} loss is not strongly convex", t)
    if mech.eta > 2 / (a.beta + a.lam) + 1e-15:
        return not_applicable(name, STRONG, REPLACE,
                              f"eta > 2/(beta + lambda) (eta={mech.eta}, beta={a.beta}, lambda={a.lam})", t)
    if a.lipschitz_reason:
        return not_applicable(name, STRONG, REPLACE, a.lipschitz_reason, t)
    c = iteration.contraction_factor(eta=mech.eta, smoothness=a.beta, strong_convexity=a.lam)
    rdp = iteration.strongly_convex_index_rdp(DEFAULT_ORDERS, n=mech.n, index=t, lipschitz=a.L,
                                              sigma=mech.spread, contraction=c)
    return rdp_claim(name, STRONG, REPLACE, DEFAULT_ORDERS, rdp, t)


def _stop_claims(mech, a: Assumptions) -> list[Claim]:
    claims = []
    reason = a.first_reason(a.lipschitz_reason, a.smooth_reason)
    if reason:
        claims.append(not_applicable("stop-rdp", THM26, REPLACE, reason))
    else:
        alpha_max = iteration.stop_pnsgd_max_order(lipschitz=a.L, sigma=mech.spread)
        orders = DEFAULT_ORDERS[DEFAULT_ORDERS <= alpha_max]
        if orders.size == 0:
            claims.append(not_applicable(
                "stop-rdp", THM26, REPLACE,
                f"sigma < L sqrt(2 (alpha - 1) alpha) for every order alpha > 1 "
                f"(alpha* = {alpha_max:.4g}, sigma={mech.spread}, L={a.L})"))
        else:
            rdp = iteration.stop_pnsgd_rdp(orders, n=mech.n, lipschitz=a.L, sigma=mech.spread)
            claims.append(rdp_claim("stop-rdp", THM26, REPLACE, orders, rdp))
    if a.lipschitz_reason:
        claims.append(not_applicable("contraction-stopped", THM5, REPLACE, a.lipschitz_reason))
    else:
        claims.append(profile_claim(
            "contraction-stopped", THM5, REPLACE,
            lambda e: egamma.stopped_log_delta(e, n=mech.n, shift_ratio=a.psi_ratio,
                                               diameter_ratio=a.diameter_ratio)))
    return claims


def _laplace_claims(mech, a: Assumptions, t: int) -> list[Claim]:
    name = "contraction-laplace"
    reasons = [a.lipschitz_reason]
    if mech.dim != 1 or mech.region.kind != "box":
        reasons.append(f"the Laplace bound needs K an interval (dim=1, domain='box'), "
                       f"got dim={mech.dim}, domain={mech.region.kind!r}")
    if mech.variant != "plain":
        reasons.append(f"the Laplace bound is for variant='plain', got variant={mech.variant!r}")
    claims = [not_applicable(n, c, REPLACE, a.gaussian_reason, t)
              for n, c in (("pabi-rdp", THM23), ("contraction-egamma", THM4))]
    reason = a.first_reason(*reasons)
    if reason:
        claims.append(not_applicable(name, LAPLACE_THM3, REPLACE, reason, t))
        return claims
    width = mech.region.high - mech.region.low
    diameter = width if a.smooth else width + 2 * mech.eta * a.L
    eps_shift = 2 * a.L / mech.spread
    eps_diameter = diameter / (mech.eta * mech.spread)
    claims.append(profile_claim(
        name, LAPLACE_THM3, REPLACE,
        lambda e: egamma.laplace_index_log_delta(e, n=mech.n, index=t, epsilon_shift=eps_shift,
                                                 epsilon_diameter=eps_diameter), t))
    return claims


def multi_epoch_claims(mech: MultiEpochNoisySgd, index: int | None) -> list[Claim]:
    """Per-index claims of multi-epoch PNSGD."""
    return without_contraction(mech, _multi_epoch_claims(mech, index))


def _multi_epoch_claims(mech, index):
    a = Assumptions(mech)
    t = mech.n if index is None else int(index)
    reason = a.first_reason(a.gaussian_reason, a.lipschitz_reason, a.smooth_reason)
    E = mech.epochs
    claims = []
    if reason:
        claims.append(not_applicable("multi-epoch-rdp", MULTI, REPLACE, reason, t))
        claims.append(not_applicable("multi-epoch-thm35", THM35, REPLACE, reason))
    else:
        rdp = iteration.multi_epoch_rdp(DEFAULT_ORDERS, n=mech.n, epochs=E, index=t, lipschitz=a.L,
                                        sigma=mech.spread)
        claims.append(rdp_claim("multi-epoch-rdp", MULTI, REPLACE, DEFAULT_ORDERS, rdp, t))
        if E <= mech.n:
            claims.append(rdp_claim("multi-epoch-thm35", THM35, REPLACE, DEFAULT_ORDERS,
                                    DEFAULT_ORDERS * 4 * a.L**2 / mech.spread**2))
        else:
            claims.append(not_applicable("multi-epoch-thm35", THM35, REPLACE,
                                         f"Thm 35 takes E <= n epochs, got epochs={E}, n={mech.n}"))
    bounded_reason = reason or ("" if math.isfinite(a.diameter) else "K is unbounded (domain='whole')")
    if bounded_reason:
        claims.append(not_applicable("bounded-domain-rdp", BOUNDED, REPLACE, bounded_reason))
    else:
        orders = np.arange(2.0, 257.0)
        steps = mech.n * E

        def window_rdp(alphas, sigma2, horizon):
            visits = min(E, math.ceil(horizon / mech.n))  # uses of the canary in the last R steps
            return visits * iteration.local_rdp(alphas, lipschitz=a.L, sigma=sigma2)

        rdp = iteration.bounded_domain_rdp(orders, diameter=a.diameter, eta=mech.eta, sigma=mech.spread,
                                           steps=steps, step_rdp=window_rdp)
        claims.append(rdp_claim("bounded-domain-rdp", BOUNDED, REPLACE, orders, rdp))
    if a.gaussian_reason or a.lipschitz_reason:
        claims.append(not_applicable("local-rdp-composed", LOCAL_COMPOSED, REPLACE,
                                     a.first_reason(a.gaussian_reason, a.lipschitz_reason)))
    else:
        claims.append(rdp_claim("local-rdp-composed", LOCAL_COMPOSED, REPLACE, DEFAULT_ORDERS,
                                E * iteration.local_rdp(DEFAULT_ORDERS, lipschitz=a.L, sigma=mech.spread)))
    return claims


BUILDERS = (
    ClaimBuilder("projected-noisy-sgd", (ProjectedNoisySgd,), pnsgd_claims),
    ClaimBuilder("multi-epoch-noisy-sgd", (MultiEpochNoisySgd,), multi_epoch_claims),
)
