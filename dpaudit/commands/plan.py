"""``dpaudit plan CONFIG --target F``: the trials at which the statistical ceiling reaches ``F`` times the truth.

For every canary position of each config, the laws of the optimal score
are those of the instance's exact value (``accounting.instances``) or, for
trained models, of the last-iterate linear-loss surrogate (a reference, not
a bound). The ceiling (docs/theory.md 3.4) is what a threshold audit with
``N`` certification trials per dataset can certify at best; it grows with
``N`` towards the exact value. The command prints the ceiling at the
configured trials and the smallest trial count (calibration included) whose
ceiling reaches the target, found by doubling and bisection to 1%. Beside
each ceiling it prints its band: where 95% of ideal threshold audits land
(``audit.statistics.ceiling.statistical_ceiling_band``).

For a trained model it also compares the designs: many trainings (the
ceiling at the configured trials, and the trainings they take) against one
run with ``m`` canaries (``--canaries``, or the config's). One run's figure
is what every one-run test certifies on ``m`` canaries free of interference,
each scored by the position's own laws (the last-iterate linear-loss
surrogate for a model): the median of ``--draws`` seeded draws and their 10%
and 90% quantiles (``audit.statistics.one_run_ceiling``; a reference, not a
bound). It then compares the canary choices of one run: the figure is the
same for Dirac and random gradient canaries, and what differs is how many
other canaries' gradients each canary's score carries, which the command
states with the variance they add beside the noise's (docs/theory.md 9).
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from tqdm import tqdm

from dpaudit.commands.common import add_progress_flags, count, emit_json, show_progress
from dpaudit.core.errors import NotExact, ParameterError
from dpaudit.core.progress import enabled
from dpaudit.reports.bands import BAND_WORDS, CEILING_WORDS

__all__ = ["canary_choices", "equivalent_mu", "one_run_forecast", "plan_pair", "trials_for_target"]

MAX_TRIALS = 10**12


def _laws(pair) -> tuple[Any, str]:
    """The score laws of ``pair`` and what they are: ``exact`` or ``surrogate``."""
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.mechanisms.accounting.instances import exact_laws

    try:
        return exact_laws(pair.mechanism, pair.dataset_a, pair.dataset_b), "exact"
    except NotExact as exc:
        reason = str(exc)
    surrogate = pair.mechanism.surrogate_output_laws()
    if surrogate is not None:
        return surrogate, "surrogate"
    raise ParameterError(f"no known score laws for {pair.mechanism.name} here ({reason}): nothing to plan")


def trials_for_target(law: tuple, goal: float, *, delta: float, confidence: float) -> int | None:
    """The smallest certification trials per dataset (to 1%) whose ceiling reaches ``goal`` (``None``: beyond 1e12)."""
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.auditing.statistics.ceiling import exact_ceiling

    def reaches(trials: int) -> bool:
        return exact_ceiling(*law, trials=trials, delta=delta, confidence=confidence) >= goal

    high = 1000
    while not reaches(high):
        if high >= MAX_TRIALS:
            return None
        high *= 2
    low = high // 2 if high > 1000 else 1
    while high - low > max(1, low // 100):
        middle = (low + high) // 2
        if reaches(middle):
            high = middle
        else:
            low = middle
    return high


def _total(certification: int, fraction: float) -> int:
    """Trials per dataset (``[audit] trials``) that leave ``certification`` after calibration."""
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.auditing.jobs.parts import calibration_trials

    total = max(int(math.ceil(certification / (1 - fraction))), 2)
    while total - calibration_trials(total, fraction) < certification:
        total += 1
    return total


def plan_pair(pair, *, target: float, delta: float, confidence: float, trials: int,
              fraction: float) -> dict[str, Any]:
    """The plan of one canary position: exact (or surrogate) value, ceiling now, trials for the target."""
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.auditing.jobs.parts import calibration_trials
    from dpaudit.auditing.statistics.ceiling import exact_ceiling_band
    from dpaudit.mechanisms.accounting.instances import likelihood_ratio_law

    laws, kind = _laws(pair)
    value = laws.epsilon(delta) if hasattr(laws, "epsilon") else _exact_epsilon(pair, delta, laws)
    law = likelihood_ratio_law(laws)
    certification = trials - calibration_trials(trials, fraction)
    now = exact_ceiling_band(*law, trials=certification, delta=delta, confidence=confidence)
    needed = None
    if math.isfinite(value) and value > 0:
        needed = trials_for_target(law, target * value, delta=delta, confidence=confidence)
    return {"index": pair.index, "value_kind": kind, "value": value if math.isfinite(value) else None,
            "ceiling": now.ceiling, "ceiling_band": list(now.band), "trials": trials, "target": target,
            "trials_for_target": _total(needed, fraction) if needed else None}


def _exact_epsilon(pair, delta: float, laws) -> float:
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.mechanisms.accounting.instances import exact_epsilon

    return exact_epsilon(pair.mechanism, pair.dataset_a, pair.dataset_b, delta, laws=laws)


def equivalent_mu(value: float, delta: float) -> float:
    """The mu whose mu-GDP epsilon at ``delta`` is ``value`` (bisection; the Gaussian pair of that value)."""
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon

    low, high = 0.0, 64.0
    for _ in range(60):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if float(gaussian_epsilon(delta, middle)) < value else (low, middle)
    return low


def one_run_forecast(laws, value: float, *, canaries: int, runs: int, delta: float, confidence: float,
                     draws: int | None = None, seed: int = 0) -> dict[str, Any]:
    """What one run with ``canaries`` canaries (``runs`` pooled) certifies when its canaries are free of
    interference, each scored by ``laws`` (a Gaussian mixture per side; ``None``: the Gaussian pair of epsilon
    ``value``): every one-run test's median over ``draws`` seeded draws (default ``FREE_DRAWS``) and their 10%
    and 90% quantiles."""
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.auditing.statistics.one_run_ceiling import FREE_DRAWS, GaussianPair, interference_free
    from dpaudit.auditing.statistics.one_run_fdp import METHODS

    draws = draws or FREE_DRAWS
    mu = equivalent_mu(value, delta)
    laws = laws if hasattr(laws, "means_a") else GaussianPair(mu)
    figures = {method: interference_free(laws, canaries=canaries * runs, delta=delta, confidence=confidence,
                                         method=method, draws=draws, seed=seed) for method in METHODS}
    return {"canaries": canaries, "runs": runs, "trainings": runs, "draws": draws, "per_canary_mu": mu,
            "laws": "gaussian-pair" if isinstance(laws, GaussianPair) else "position",
            "certifiable": {method: figure.median for method, figure in figures.items()},
            "bands": {method: [figure.low, figure.high] for method, figure in figures.items()}}


def canary_choices(laws, *, canaries: int, parameters: int, configured: str) -> list[dict[str, Any]]:
    """The canary choices of one run for a model: for gradient canaries (Dirac, random) the other canaries'
    gradients each score carries on average and the variance they add as a share of the noise's along it; for
    input canaries neither is known here. ``configured`` names the config's choice (``"gradient, dirac"``)."""
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.auditing.statistics.one_run_ceiling import canary_overlap, interference_share

    rows = []
    for directions in ("dirac", "random"):
        overlap = canary_overlap(canaries, parameters, directions)
        share = interference_share(laws, overlap) if hasattr(laws, "means_a") else None
        rows.append({"choice": f"gradient, {directions}", "overlap": overlap, "interference_share": share})
    rows.append({"choice": "input", "overlap": None, "interference_share": None})
    return [{**row, "configured": row["choice"] == configured} for row in rows]


def _choices_text(choices: list[dict[str, Any]]) -> str:
    parts = []
    for row in choices:
        name = row["choice"] + (" (configured)" if row["configured"] else "")
        if row["overlap"] is None:
            parts.append(f"{name}: its gradient is clipped to C but moves with the model and shares the data's "
                         f"directions; not estimated here")
            continue
        share = (f", adding {100 * row['interference_share']:.3g}% to the noise's variance along it"
                 if row["interference_share"] is not None else "")
        parts.append(f"{name}: each score carries {row['overlap']:.3g} other canaries' gradients on average{share}")
    return "; ".join(parts)


def _many_runs(config):
    """The config itself, or for a one-run config the same training audited by many trainings."""
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.auditing.jobs.config import AuditConfig

    if config.one_run is None:
        return config
    return AuditConfig({**config.resolved, "one_run": None}, config.source)


def _run(args: argparse.Namespace) -> int:
    # the command line loads a subcommand's modules when it runs: dpaudit --help imports no NumPy
    from dpaudit.auditing.jobs.config import load_configs
    from dpaudit.auditing.jobs.one_run_design import DEFAULT_DIRECTIONS

    if not 0 < args.target < 1:
        raise ParameterError(f"target must be a fraction in (0, 1), got target={args.target}")
    shown = show_progress(args, enabled())
    documents = []
    for config in load_configs(args.config):
        one_run = config.one_run
        job = _many_runs(config).job()
        settings = job.settings
        confidence = 1 - (1 - settings.confidence) / len(job.pairs)  # the audit's per-position confidence
        rows = []
        steps = len(job.pairs) + 2 * (config.mechanism.name == "model")  # each position; a model's two designs
        bar = tqdm(total=steps, desc=f"planning {config.title}", unit="step", file=sys.stderr, disable=not shown,
                   dynamic_ncols=True, leave=False)
        for pair in job.pairs:
            try:
                rows.append(plan_pair(pair, target=args.target, delta=settings.delta, confidence=confidence,
                                      trials=settings.trials, fraction=settings.calibration_fraction))
            except ParameterError as exc:  # this position has no known laws; the others are still planned
                rows.append({"index": pair.index, "value_kind": None, "reason": str(exc)})
            bar.update()
        document = {"title": config.title, "source": config.source, "delta": settings.delta,
                    "confidence": confidence, "positions": rows}
        known = [row for row in rows if row.get("value")]
        if config.mechanism.name == "model" and known:
            strongest = max(known, key=lambda row: row["value"])
            laws, _ = _laws(next(pair for pair in job.pairs if pair.index == strongest["index"]))
            bar.update()
            canaries = args.canaries or (one_run or {}).get("canaries") or 1000
            configured = (f"gradient, {(one_run or {}).get('directions') or DEFAULT_DIRECTIONS}"
                          if (config.canary.kind or "gradient") == "gradient" else "input")
            document["designs"] = {
                "many-runs": {"trials": settings.trials, "trainings": 2 * settings.trials * len(job.pairs),
                              "ceiling": max(row["ceiling"] for row in known)},
                "one-run": {**one_run_forecast(laws, strongest["value"], canaries=canaries,
                                               runs=(one_run or {}).get("runs", 1), delta=settings.delta,
                                               confidence=settings.confidence, draws=args.draws),
                            "choices": canary_choices(laws, canaries=canaries,
                                                      parameters=config.mechanism.parameter_count,
                                                      configured=configured)}}
            bar.update()
        bar.close()
        documents.append(document)
    if all(row["value_kind"] is None for document in documents for row in document["positions"]):
        first = documents[0]["positions"][0]["reason"]
        raise ParameterError(first if len(documents) == 1 else f"no config has known score laws; first: {first}")
    if args.json:
        emit_json(documents)
        return 0
    for document in documents:
        print(f"{document['title']} ({document['source']}), delta {document['delta']:g}")
        for row in document["positions"]:
            where = f"index {row['index']}: " if row["index"] is not None else ""
            label = "exact value" if row["value_kind"] == "exact" else \
                "last-iterate linear-loss surrogate (a reference, not a bound)"
            if row["value_kind"] is None:
                print(f"  {where}not planned: {row['reason']}")
                continue
            if row["value"] is None:
                print(f"  {where}{label}: none finite at this delta")
                continue
            needed = row["trials_for_target"]
            low, high = row["ceiling_band"]
            print(f"  {where}{label} {row['value']:.4f}; ceiling {row['ceiling']:.4f} at trials={row['trials']} "
                  f"({row['ceiling'] / row['value']:.3f} of it; 95% of ideal audits certify {low:.4f} to "
                  f"{high:.4f}); a ceiling of {row['target']:g} x {row['value']:.4f} "
                  + (f"needs trials={needed} per dataset" if needed else f"needs more than {MAX_TRIALS:.0e} trials"))
        if "designs" in document:
            many, one = document["designs"]["many-runs"], document["designs"]["one-run"]
            bounds = ", ".join(f"{method} {value:.3f} ({low:.3f} to {high:.3f})" for (method, value), (low, high)
                               in zip(one["certifiable"].items(), one["bands"].values()))
            laws = ("the position's own score laws" if one["laws"] == "position" else
                    f"a Gaussian pair of mu {one['per_canary_mu']:.3f}")
            print(f"  designs: many trainings ({many['trainings']} trainings) certify at most the ceiling "
                  f"{many['ceiling']:.4f}; one run with {one['canaries']} canaries ({one['trainings']} training"
                  f"{'s' if one['trainings'] > 1 else ''}), each free of interference and scored by {laws}, "
                  f"certifies about {bounds} (medians of {one['draws']} seeded draws, 10% and 90% quantiles in "
                  f"brackets: a reference, not a bound)")
            print(f"  canary choices of one run (the same figure free of interference; they differ in how the "
                  f"canaries interfere): {_choices_text(one['choices'])}; the data's own gradients add to every "
                  f"choice, not estimated here")
    if any(row.get("ceiling_band") for document in documents for row in document["positions"]):
        print(f"Statistical ceiling: {CEILING_WORDS}\nCeiling band: {BAND_WORDS}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "plan", help="trials at which the statistical ceiling reaches a fraction of the exact value")
    parser.add_argument("config", nargs="+", metavar="CONFIG", help="audit config files (TOML)")
    parser.add_argument("--target", type=float, required=True,
                        help="fraction F in (0, 1) of the exact (or surrogate) value the ceiling should reach")
    parser.add_argument("--canaries", type=count(2), default=None,
                        help="canaries of the one-run design compared for models (default: the config's, or 1000)")
    add_progress_flags(parser, "when stderr is a terminal")
    parser.add_argument("--draws", type=count(1), default=None,
                        help="seeded draws of canaries free of interference per one-run figure (default 21)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.set_defaults(handler=_run)
