"""The theory map of the gallery section "Is the hidden state private?" (docs/theory.md 5.1).

Three panels, each at ``delta = 1e-5``: DP-SGD's last iterate as the number
of steps grows and as the sampling rate grows (Poisson batches, gradient
canary against nothing, noise multiplier 1), and PNSGD on the whole space
by canary position. Each shows the claims (upper bounds), the instance's
exact value, and the statistical ceiling of a threshold audit at 1e5 and
1e6 trials with its band (shaded: where 95% of ideal threshold audits land): the gap from a claim down to the exact value is the slack of
the theorem, the gap from the exact value down to a ceiling the slack any
audit with that many trials must leave. DP-LSSGD's last iterate is an
invertible image of DP-SGD's: its exact values are those of the first two
panels.
"""

from __future__ import annotations

import math

import numpy as np

from dpaudit import mechanisms
from dpaudit.attacks.canaries import CanarySpec
from dpaudit.auditing.statistics.ceiling import exact_ceiling_band
from dpaudit.mechanisms.accounting.claims import evaluate_claims
from dpaudit.mechanisms.accounting.instances import exact_epsilon, exact_laws, likelihood_ratio_law
from dpaudit.reports import plots

__all__ = ["hidden_state_rows", "hidden_state_svg"]

DELTA = 1e-5
TRIALS = (100_000, 1_000_000)
STEPS = (5, 20, 50, 200)
RATES = (0.02, 0.1, 0.3, 1.0)
POSITIONS = (1, 4, 8, 12, 16, 20)
_OFF_SCALE = ("subsampling-composition",)  # basic composition: one to two orders above the rest


def _point(mech, index: int, pair_kind: str) -> dict[str, float | None]:
    """Claims, exact value and ceilings of one instance (a gradient canary at ``index``)."""
    pair = CanarySpec(kind="gradient", pair=pair_kind).build(mech, index)
    row: dict[str, float | None] = {}
    for entry in evaluate_claims(mech.claims(index=index), delta=DELTA):
        if entry.is_bound and entry.relation == pair.relation and entry.name not in _OFF_SCALE:
            row[entry.name] = entry.epsilon
    row["exact"] = exact_epsilon(mech, pair.dataset_a, pair.dataset_b, DELTA)
    law = likelihood_ratio_law(exact_laws(mech, pair.dataset_a, pair.dataset_b))
    for trials in TRIALS:
        ceiling = exact_ceiling_band(*law, trials=trials, delta=DELTA)
        row[f"ceiling {trials:.0e}"] = ceiling.ceiling
        row[f"band {trials:.0e}"] = ceiling.band
    return row


def hidden_state_rows() -> dict[str, tuple[tuple, list[dict]]]:
    """The map's numbers: per panel, its x values and one row of values per x."""
    sgd = dict(n=100, dim=1, eta=0.5, noise_std=0.1, sampling="poisson", batch_size=10)  # noise multiplier 1
    steps = [_point(mechanisms.make("dp-sgd", **{**sgd, "steps": t}), 100, "zero") for t in STEPS]
    rates = [_point(mechanisms.make("dp-sgd", **{**sgd, "steps": 50, "batch_size": round(100 * q),
                                                 "noise_std": 1.0 / round(100 * q)}), 100, "zero") for q in RATES]
    pnsgd = mechanisms.make("pnsgd", n=20, dim=2, eta=0.1, sigma=2.0, domain="whole")
    positions = [_point(pnsgd, t, "opposite") for t in POSITIONS]
    return {"steps": (STEPS, steps), "rates": (RATES, rates), "positions": (POSITIONS, positions)}


def hidden_state_svg(rows: dict | None = None) -> str:
    """The three panels as one SVG figure."""
    rows = rows or hidden_state_rows()
    figure, _ = plots.new_figure(figsize=(12.0, 3.8))
    figure.clear()
    axes_list = figure.subplots(1, 3)
    titles = {"steps": ("DP-SGD last iterate: steps T (q = 0.1)", "steps T"),
              "rates": ("DP-SGD last iterate: sampling rate q (T = 50)", "sampling rate q"),
              "positions": ("PNSGD, whole space: canary index (n = 20)", "canary index t")}
    for axes, (panel, (xs, values)) in zip(axes_list, rows.items()):
        names = [name for name in values[0] if name != "exact" and not name.startswith(("ceiling", "band"))]
        for number, name in enumerate(names):
            axes.plot(xs, [_finite(v.get(name)) for v in values], label=f"{name} (claim)", **plots._distinct(number))
        axes.plot(xs, [_finite(v["exact"]) for v in values], color="tab:red", linewidth=2.5, label="exact value")
        for trials, style in zip(TRIALS, ("--", ":")):
            key = f"ceiling {trials:.0e}"
            axes.plot(xs, [_finite(v[key]) for v in values], color="grey", linestyle=style,
                      label=f"ceiling, {trials:.0e} trials")
            bands = [v[f"band {trials:.0e}"] for v in values]
            axes.fill_between(xs, [_finite(b[0]) for b in bands], [_finite(b[1]) for b in bands], color="grey",
                              alpha=0.15, linewidth=0)
        title, label = titles[panel]
        if panel != "positions":
            axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_title(title, fontsize=9)
        axes.set_xlabel(label)
        axes.set_ylabel(f"epsilon at delta={DELTA:g}")
        axes.legend(fontsize=6)
    return plots.to_svg(figure)


def _finite(value: float | None) -> float:
    return float(value) if value is not None and math.isfinite(value) and value > 0 else np.nan
