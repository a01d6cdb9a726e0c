"""Report figures as inline SVG strings (matplotlib's object API and its SVG writer).

Figures hold no user-supplied text: titles and labels are fixed strings,
so the SVG needs no escaping beyond what matplotlib does.
"""

from __future__ import annotations

import io
import math
import re
from typing import Any

import matplotlib
from matplotlib.figure import Figure

__all__ = ["epsilon_by_index", "histograms", "privacy_profile", "roc", "to_svg"]

# Applied per figure (matplotlib.rc_context): importing this module changes no global setting.
_STYLE = {"svg.fonttype": "none", "figure.dpi": 96, "font.size": 9,
          "axes.spines.top": False, "axes.spines.right": False}
_PROLOG = re.compile(r"^.*?(?=<svg)", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>", re.S)


def new_figure(figsize: tuple[float, float]):
    """A figure and its axes, made with the object API (no pyplot state, no backend switch)."""
    with matplotlib.rc_context(_STYLE):
        figure = Figure(figsize=figsize)
        return figure, figure.subplots()


def to_svg(figure) -> str:
    """The figure as an ``<svg>`` element with no XML prolog, DOCTYPE or metadata links."""
    buffer = io.StringIO()
    with matplotlib.rc_context(_STYLE):
        figure.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = _PROLOG.sub("", buffer.getvalue(), count=1)
    return _METADATA.sub("", text)


def _finite(values):
    return [v if v is not None and math.isfinite(v) else math.nan for v in values]


def epsilon_by_index(document: dict[str, Any]) -> str:
    """Certified epsilon by canary index, every applicable claim, exact values and the ceiling."""
    rows = [r for r in document["per_index"] if r["index"] is not None] or document["per_index"]
    x = [r["index"] if r["index"] is not None else 0 for r in rows]
    figure, axes = new_figure(figsize=(6.4, 3.6))
    names = []
    for row in rows:
        for claim in row["claims"]:
            if claim["applicable"] and claim["name"] not in names:
                names.append(claim["name"])
    for name in names:
        values = []
        for row in rows:
            match = next((c for c in row["claims"] if c["name"] == name and c["applicable"]), None)
            values.append(match["epsilon"] if match else None)
        kind = next((c.get("kind") for r in rows for c in r["claims"] if c["name"] == name), "upper-bound")
        style = dict(marker="s", linestyle=":") if kind == "exact-instance" else dict(marker=".", linestyle="-")
        axes.plot(x, _finite(values), label=f"{name} ({'exact' if kind == 'exact-instance' else 'claim'})", **style)
    lower = [r["empirical"]["epsilon_lower_bound"] for r in rows]
    axes.plot(x, lower, color="black", marker="o", linewidth=2,
              label=f"certified lower bound ({rows[0]['empirical']['confidence']:.3g} each)")
    ceilings = [r.get("ceiling") for r in rows]
    if any(c is not None for c in ceilings):
        axes.plot(x, _finite(ceilings), color="grey", linestyle="--", label="statistical ceiling")
    axes.set_xlabel("canary index t")
    axes.set_ylabel("epsilon at the audit's delta")
    axes.set_ylim(bottom=0)
    axes.legend(fontsize=7, loc="best")
    axes.set_title("Epsilon by canary position")
    return to_svg(figure)


def privacy_profile(document: dict[str, Any]) -> str:
    """Certified ``delta_lb(eps)`` under the claimed ``delta(eps)`` curves (log scale)."""
    empirical = document["empirical"]["profile"]
    figure, axes = new_figure(figsize=(6.4, 3.6))
    for claim in document["claims"]:
        curve = claim.get("profile")
        if claim["applicable"] and curve:
            axes.plot(curve["epsilons"], [max(d, 1e-300) for d in curve["deltas"]], label=claim["name"])
    deltas = [d if d > 0 else math.nan for d in empirical["delta_lower_bounds"]]
    axes.plot(empirical["epsilons"], deltas, color="black", marker="o", markersize=3, linewidth=2,
              label="certified lower bound")
    axes.set_yscale("log")
    axes.set_ylim(1e-8, 1.5)
    axes.set_xlabel("epsilon")
    axes.set_ylabel("delta(epsilon)")
    axes.legend(fontsize=7)
    axes.set_title("Privacy profile")
    return to_svg(figure)


def roc(document: dict[str, Any]) -> str:
    """The distinguisher's ROC (TPR against FPR) on log axes, at the strongest index."""
    row = _strongest(document)
    data = row["distributions"]["roc"]
    figure, axes = new_figure(figsize=(4.2, 3.6))
    points = [(f, t) for f, t in zip(data["fpr"], data["tpr"]) if f > 0 and t > 0]
    if points:
        fpr, tpr = zip(*points)
        axes.plot(fpr, tpr, color="black")
    axes.plot([1e-6, 1], [1e-6, 1], color="grey", linestyle=":")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_xlabel("false positive rate")
    axes.set_ylabel("true positive rate")
    axes.set_title("ROC of the distinguisher")
    return to_svg(figure)


def histograms(document: dict[str, Any]) -> str:
    """Score histograms on S and S' at the strongest index."""
    data = _strongest(document)["distributions"]["histogram"]
    edges = data["edges"]
    centres = [(a + b) / 2 for a, b in zip(edges[:-1], edges[1:])]
    width = edges[1] - edges[0]
    figure, axes = new_figure(figsize=(4.2, 3.6))
    axes.bar(centres, data["a"], width=width, alpha=0.55, label="S")
    axes.bar(centres, data["b"], width=width, alpha=0.55, label="S'")
    axes.set_xlabel("score")
    axes.set_ylabel("trials")
    axes.legend()
    axes.set_title("Scores on S and S'")
    return to_svg(figure)


def _strongest(document: dict[str, Any]) -> dict[str, Any]:
    index = document["empirical"].get("index")
    return next((r for r in document["per_index"] if r["index"] == index), document["per_index"][0])
