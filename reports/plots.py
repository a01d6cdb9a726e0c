"""Report figures as inline SVG strings (matplotlib's object API and its SVG writer).

Figures hold no user-supplied text: titles and labels are fixed strings,
so the SVG needs no escaping beyond what matplotlib does.
"""

from __future__ import annotations

import io
import math
import re
from typing import TYPE_CHECKING, Any

import matplotlib
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter

from dpaudit.auditing.jobs.result import load_result
from dpaudit.reports.captions import certifying_test, exact_value, neighbour_label
from dpaudit.reports.tables import tightest_claim

if TYPE_CHECKING:
    from dpaudit.auditing.jobs.result import AuditResult, IndexResult

__all__ = ["ceiling_band", "epsilon_by_index", "histograms", "privacy_profile", "roc", "running_bound", "to_svg"]

# Applied per figure (matplotlib.rc_context): importing this module changes no global setting.
# svg.hashsalt: marker and clip-path ids hashed from a fixed salt, so a report renders to the same bytes every time
_STYLE = {"svg.fonttype": "none", "svg.hashsalt": "dpaudit", "figure.dpi": 96, "font.size": 10,
          "axes.spines.top": False, "axes.spines.right": False}
_PROLOG = re.compile(r"^.*?(?=<svg)", re.S)
_METADATA = re.compile(r"<metadata>.*?</metadata>", re.S)


#: How the plots name each kind of claim entry (anything else is a claim: an upper bound).
_KIND_LABELS = {"exact-instance": "exact value", "reference": "reference, not a bound",
                "lower-bound": "lower bound, not a guarantee"}


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


_MARKERS = ("s", "^", "D", "v", "P", "X", "<", ">")
_LINES = ("-", "--", "-.", ":")


def _distinct(number: int) -> dict[str, Any]:
    """Marker and line style of the ``number``-th curve: overlapping curves stay distinguishable."""
    return {"marker": _MARKERS[number % len(_MARKERS)], "linestyle": _LINES[number % len(_LINES)],
            "markersize": 5, "markerfacecolor": "none", "alpha": 0.9}


def _label(text: Any) -> str:
    """A legend label from result text: no mathtext (``$``), not hidden (a leading ``_``), one line."""
    printable = "".join(ch for ch in str(text) if ch.isprintable() or ch.isspace())
    clean = " ".join(printable.split()).replace("$", r"\$")
    return clean.lstrip("_") or "?"


_SUPERSCRIPTS = str.maketrans("-0123456789", "\u207b\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079")


def _decade(value: float, _position: int | None = None) -> str:
    """``10`` with the exponent in superscript digits at a power of ten, else no label."""
    exponent = round(math.log10(value)) if value > 0 else None
    if exponent is None or not math.isclose(value, 10.0**exponent, rel_tol=1e-9):
        return ""
    return "1" if exponent == 0 else "10" + str(exponent).translate(_SUPERSCRIPTS)


def _log_scale(axes, which: str) -> None:
    """A log scale labelled at its decades in plain text: matplotlib's default labels are mathtext, whose parsing
    took about half of each figure's time; unlabelled minor ticks at 2 and 5 times each decade (not every integer
    multiple: each tick is an object matplotlib lays out twice)."""
    getattr(axes, f"set_{which}scale")("log")
    axis = getattr(axes, f"{which}axis")
    axis.set_major_formatter(FuncFormatter(_decade))
    axis.set_minor_locator(LogLocator(subs=(2.0, 5.0)))
    axis.set_minor_formatter(NullFormatter())


def _legend(axes) -> None:
    axes.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def epsilon_by_index(result: "AuditResult | dict[str, Any]") -> str:
    """Certified epsilon by canary index against the tightest claim, the exact value and the ceiling's band.

    Meant for two or more positions (the report draws :func:`ceiling_band` for one). The axis is
    scaled to what is compared: certified bounds, exact values, ceiling bands and the tightest
    applicable claim at each position, never to looser claims.
    """
    result = _typed(result)
    rows = [r for r in result.per_index if r.index is not None] or list(result.per_index)
    x = [r.index if r.index is not None else 0 for r in rows]
    figure, axes = new_figure(figsize=(8.0, 4.2))
    relation = result.canary.get("relation")
    tightest = [tightest_claim(r, relation) for r in rows]
    names = sorted({c.name for c in tightest if c is not None})
    if names:
        label = f"tightest claim ({names[0]})" if len(names) == 1 else "tightest claim at each index"
        axes.plot(x, _finite([c.epsilon if c else None for c in tightest]), label=_label(label), **_distinct(0))
    exact = [next((c.epsilon for c in r.claims if c.kind == "exact-instance" and c.applicable), None) for r in rows]
    if any(v is not None for v in exact):
        axes.plot(x, _finite(exact), color="tab:red", marker="x", linewidth=1.5, label="exact value")
    bands = [r.ceiling_band for r in rows]
    if any(b is not None for b in bands):
        lows, highs = _finite([b[0] if b else None for b in bands]), _finite([b[1] if b else None for b in bands])
        axes.fill_between(x, lows, highs, color="grey", alpha=0.25, linewidth=0,
                          label="ceiling band (95% of ideal audits)")
    ceilings = [r.ceiling for r in rows]
    if any(c is not None for c in ceilings):
        axes.plot(x, _finite(ceilings), color="grey", linestyle="--", marker="_", label="statistical ceiling")
    lower = [r.empirical.epsilon_lower_bound for r in rows]
    confidence = rows[0].empirical.confidence
    axes.plot(x, lower, color="black", marker="o", linewidth=2.5,
              label=f"certified lower bound (confidence {confidence:.3g} each)")
    shown = [v for v in (*lower, *exact, *ceilings, *(b[1] for b in bands if b),
                         *(c.epsilon for c in tightest if c)) if v is not None and math.isfinite(v)]
    axes.set_ylim(0, 1.12 * max(shown) if shown and max(shown) > 0 else 1.0)
    axes.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=min(len(x), 10)))
    axes.set_xlabel("canary index t (position of the canary record)")
    axes.set_ylabel("epsilon at the audit's delta")
    _legend(axes)
    axes.set_title("Epsilon by canary position")
    return to_svg(figure)


def ceiling_band(result: "AuditResult | dict[str, Any]") -> str:
    """One position's certified bound on a line against its ceiling band, the tightest claim and the exact value.

    The band is what an ideal threshold audit certifies 95% of the time at these trials
    (``audit.statistics.ceiling.statistical_ceiling_band``).
    """
    result = _typed(result)
    row = _strongest(result)
    figure, axes = new_figure(figsize=(8.0, 1.9))
    shown = [row.empirical.epsilon_lower_bound]
    if row.ceiling_band is not None:
        low, high = row.ceiling_band
        axes.axvspan(low, high, ymin=0.25, ymax=0.75, color="grey", alpha=0.3, linewidth=0,
                     label="ceiling band (95% of ideal audits)")
        shown.append(high)
    if row.ceiling is not None:
        axes.plot([row.ceiling] * 2, [0.25, 0.75], color="grey", linestyle="--", label="statistical ceiling")
        shown.append(row.ceiling)
    claim = tightest_claim(row, result.canary.get("relation"))
    if claim is not None:
        axes.axvline(claim.epsilon, color="tab:blue", linestyle=":", linewidth=1.5,
                     label=_label(f"tightest claim ({claim.name})"))
        shown.append(claim.epsilon)
    exact = exact_value(row)
    if exact is not None:
        axes.axvline(exact, color="tab:red", linewidth=1.5, label="exact value")
        shown.append(exact)
    axes.plot([row.empirical.epsilon_lower_bound], [0.5], color="black", marker="o", markersize=9, linestyle="none",
              label="certified lower bound")
    finite = [v for v in shown if v is not None and math.isfinite(v)]
    axes.set_xlim(0, 1.1 * max(finite) if finite and max(finite) > 0 else 1.0)
    axes.set_ylim(0, 1)
    axes.set_yticks([])
    axes.spines["left"].set_visible(False)
    axes.set_xlabel("epsilon at the audit's delta")
    _legend(axes)
    where = f" at canary index {row.index}" if row.index is not None else ""
    against = "the ceiling band" if row.ceiling_band is not None else "the tightest claim"
    axes.set_title(f"Certified bound against {against}{where}")
    return to_svg(figure)


def privacy_profile(result: "AuditResult | dict[str, Any]") -> str:
    """Certified ``delta_lb(eps)`` under the claimed and exact ``delta(eps)`` curves, at the strongest index."""
    result = _typed(result)
    row = _strongest(result)
    empirical = row.empirical.profile
    figure, axes = new_figure(figsize=(8.0, 4.2))
    number = 0
    for claim in row.claims:
        curve = claim.profile
        if curve:  # applicable claims, references, and claims stated for delta > 0 (at an audit at delta 0)
            exact = claim.kind == "exact-instance"
            style = {"color": "tab:red", "linewidth": 2} if exact else _distinct(number)
            number += 0 if exact else 1
            axes.plot(curve["epsilons"], [max(d, 1e-300) for d in curve["deltas"]],
                      label=_label(f"{claim.name} ({_KIND_LABELS.get(claim.kind, 'claim')})"), **style)
    deltas = [d if d > 0 else math.nan for d in empirical["delta_lower_bounds"]]
    axes.plot(empirical["epsilons"], deltas, color="black", marker="o", markersize=3, linewidth=2.5,
              label="certified lower bound")
    delta = result.empirical.delta
    if delta and delta > 0:
        axes.axhline(delta, color="grey", linestyle=":", linewidth=1, label=f"the audit's delta = {delta:g}")
        certified = row.empirical.epsilon_lower_bound
        if math.isfinite(certified) and certified > 0:  # the headline: epsilon certified at the audit's delta
            axes.plot([certified], [delta], color="tab:orange", marker="*", markersize=14, linestyle="none",
                      markeredgecolor="black", label=f"certified: epsilon >= {certified:.3f} at delta = {delta:g}")
    _log_scale(axes, "y")
    axes.set_ylim(1e-8, 1.5)
    axes.set_xlabel("epsilon")
    axes.set_ylabel("delta(epsilon)")
    _legend(axes)
    where = f" at canary index {row.index}" if row.index is not None else ""
    axes.set_title(f"Privacy profile{where}")
    return to_svg(figure)


def roc(result: "AuditResult | dict[str, Any]") -> str:
    """The distinguisher's ROC on log axes, from the side this audit's test certifies from, with its AUC and the
    audit's certified rates marked.

    A test certified at low false-positive rates is drawn as TPR against FPR. One certified from the far corner
    (it fires on almost every trial; its bound counts how rarely S' falls on the other side,
    ``log((1-delta-FPR)/FNR)``) is drawn from that side: the rate S' is called S (FNR) against the rate S is
    (1 - FPR), so that its point is not lost in the corner of a log plot.
    """
    result = _typed(result)
    row = _strongest(result)
    data = row.distributions["roc"]
    place = certifying_test(result)
    far = bool(place and place["far"])
    figure, axes = new_figure(figsize=(5.2, 4.4))
    pairs = [(1 - t, 1 - f) for f, t in zip(data["fpr"], data["tpr"])] if far else list(zip(data["fpr"], data["tpr"]))
    points = [(x, y) for x, y in pairs if x > 0 and y > 0]
    label = "distinguisher"
    if "auc" in data:
        label = f"AUC {data['auc']:.3f}; TPR {data['tpr_at_fpr']:.3f} at FPR {data['fpr_level']:g}"
    if points:
        xs, ys = zip(*points)
        axes.plot(xs, ys, color="black", linewidth=2, label=label)
    axes.plot([1e-6, 1], [1e-6, 1], color="grey", linestyle=":", label="chance")
    if place is not None:
        x, y = (place["fnr"], 1 - place["fpr"]) if far else (place["fpr"], 1 - place["fnr"])
        if x > 0 and y > 0:
            axes.plot([x], [y], color="tab:orange", marker="*", markersize=14, linestyle="none",
                      markeredgecolor="black", label="this audit's test (certified rates)")
    elif "fpr_level" in data:
        axes.axvline(data["fpr_level"], color="tab:blue", linestyle="--", linewidth=1)
    _log_scale(axes, "x")
    _log_scale(axes, "y")
    axes.set_xlabel("rate S' is called S (false negatives)" if far else "false positive rate (S called S')")
    axes.set_ylabel("rate S is called S (1 - false positives)" if far else "true positive rate")
    axes.legend(fontsize=8, loc="lower right")
    where = f" (canary index {row.index})" if row.index is not None else ""
    axes.set_title(f"ROC of the distinguisher{where}")
    return to_svg(figure)


def histograms(result: "AuditResult | dict[str, Any]") -> str:
    """Score histograms on S (holds the canary record) and S' (its neighbour)."""
    result = _typed(result)
    row = _strongest(result)
    data = row.distributions["histogram"]
    edges = data["edges"]
    centres = [(a + b) / 2 for a, b in zip(edges[:-1], edges[1:])]
    width = edges[1] - edges[0]
    figure, axes = new_figure(figsize=(5.2, 4.4))
    neighbour = neighbour_label(result)
    axes.bar(centres, data["a"], width=width, alpha=0.55, label="S: holds the canary")
    axes.bar(centres, data["b"], width=width, alpha=0.55, label=neighbour)
    place = certifying_test(result)
    if place is not None and edges[0] <= place["threshold"] <= edges[-1]:
        axes.axvline(place["threshold"], color="black", linestyle="--", linewidth=1.2, label="this audit's threshold")
    axes.set_xlabel("score of one trial's output")
    axes.set_ylabel("trials")
    axes.legend(fontsize=8)
    where = f" at canary index {row.index}" if row.index is not None else ""
    axes.set_title(f"Scores on S and S'{where}")
    return to_svg(figure)


def running_bound(result: "AuditResult | dict[str, Any]") -> str:
    """The certified bound of each position against trials per dataset (a step line), with the target claim."""
    record = _typed(result).anytime
    figure, axes = new_figure(figsize=(8.0, 3.2))
    drawn = int(record.get("trials_drawn") or 1)
    for key, entry in (record.get("positions") or {}).items():
        steps = entry.get("trajectory") or []
        xs = [1] + [int(t) for t, _ in steps] + [drawn]
        ys = [0.0] + [float(b) for _, b in steps] + [float(entry.get("epsilon_lower_bound", 0.0))]
        label = "certified bound" if len(record["positions"]) == 1 else f"certified bound, index {key}"
        axes.step(xs, ys, where="post", label=label)
    targets = {v for v in (record.get("targets") or {}).values() if v is not None and math.isfinite(v)}
    for target in sorted(targets):
        axes.axhline(target, color="tab:blue", linestyle=":", label="claim watched against")
    if record.get("stopped") == "violation":
        axes.axvline(record["stopping_trial"], color="tab:red", linestyle="--", label="first certified violation")
    axes.set_xscale("log")
    axes.set_xlim(1, max(drawn, 2))
    axes.set_xlabel("trials per dataset")
    axes.set_ylabel("epsilon >= (anytime-valid)")
    axes.legend(loc="best", fontsize=8, frameon=False)
    axes.set_title("The running certified bound (valid at every trial together)")
    return to_svg(figure)


def _strongest(result: "AuditResult") -> "IndexResult":
    index = result.empirical.index
    return next((r for r in result.per_index if r.index == index), result.per_index[0])


def _typed(result: "AuditResult | dict[str, Any]") -> "AuditResult":
    return load_result(result)
