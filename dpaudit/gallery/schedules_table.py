"""Section "When does the hidden state hide anything?": scheduled canaries side by side (docs/theory.md 10).

Configs in ``schedules/``: DP-SGD's last iterate (n = 100, batches of 100,
250 steps, noise multiplier 15.81) with a crafted gradient every k = 1, 5, 25
steps and the linear loss, after Cebere, Bellet and Papernot (2025); then one
gradient at step 1 of 50 (noise multiplier 1) with the linear loss and with
the concave loss, whose steps expand, after Annamalai (2024); and the same
pair of losses on PNSGD, the seeds' own mechanism, with the canary at index
1 of 20. The table puts
each audit's certified bound next to the exact value of its instance, the
every-iterate value of the canary's steps (composition) and the
amplification-by-iteration bound for the last iterate (or why it does not
apply), and the share of the every-iterate value the last iterate keeps.
For PNSGD the every-iterate value is ``local-rdp`` (the canary's one step)
and the amplification bound ``pabi-rdp`` (Feldman et al. Thm 23).
"""

from __future__ import annotations

from html import escape

__all__ = ["TAKEAWAY", "schedules_table"]

TAKEAWAY = ("What to take from it: with a linear loss the hidden state hides nothing when the crafted gradient is "
            "in every step (k = 1: the last iterate is worth every iterate), and hides more as the gradient "
            "skips steps, because the noise of the steps it is absent from masks it (the last iterate keeps "
            "1/sqrt(k) of the every-iterate mu). That protection comes from contraction, which convexity gives: "
            "with a loss whose steps expand, one early gradient is carried to the last iterate almost whole, "
            "the audit certifies above what amplification by iteration would claim for a convex loss, and only "
            "the composition bound still holds.")


def _number(value) -> str:
    return "&ndash;" if value is None else f"{value:.3f}"


#: Per column, the claim that fills it: a scheduled canary's, else PNSGD's.
EVERY_ITERATE = ("scheduled-composition", "local-rdp")
AMPLIFICATION = ("scheduled-amplification", "pabi-rdp")


def _first(claims: dict, names: tuple[str, ...]):
    return next((claims[name] for name in names if name in claims), None)


def _steps(canary: dict) -> str:
    if canary.get("indices") and canary["indices"][0] is not None:
        return "index " + ", ".join(str(index) for index in canary["indices"])
    if canary.get("every") is not None:
        return f"every {canary['every']}"
    steps = canary.get("steps") or []
    return "steps " + ", ".join(str(step) for step in steps[:5]) + (", ..." if len(steps) > 5 else "")


def schedules_table(results) -> str:
    """An HTML table: per audit, certified, exact, composition and amplification side by side, and a sentence."""
    rows = []
    for result in results:
        row = result.per_index[0]
        claims = {claim.name: claim for claim in row.claims}
        exact = claims.get("exact-instance")
        composition = _first(claims, EVERY_ITERATE)
        amplification = _first(claims, AMPLIFICATION)
        kept = (f"{exact.epsilon / composition.epsilon:.2f}" if exact and composition and exact.epsilon
                and composition.epsilon else "&ndash;")
        if amplification is not None and amplification.applicable:
            theorem = _number(amplification.epsilon)
        else:
            theorem = "not applicable: " + escape(amplification.reason if amplification else "no such claim")
        rows.append(f"<tr><td>{escape(result.title)}</td><td>{escape(_steps(result.canary))}</td>"
                    f"<td>{_number(row.empirical.epsilon_lower_bound)}</td>"
                    f"<td>{_number(exact.epsilon if exact else None)}</td>"
                    f"<td>{_number(composition.epsilon if composition else None)}</td><td>{theorem}</td>"
                    f"<td>{kept}</td><td>{_number(row.ceiling)}</td></tr>")
    return ("<table class='schedules'><thead><tr><th>audit</th><th>canary at</th><th>certified epsilon</th>"
            "<th>exact (last iterate)</th><th>every iterate (composition)</th><th>amplification by iteration</th>"
            "<th>exact / every iterate (epsilon)</th><th>ceiling</th></tr></thead><tbody>" + "".join(rows)
            + f"</tbody></table><p>{escape(TAKEAWAY)}</p>")
