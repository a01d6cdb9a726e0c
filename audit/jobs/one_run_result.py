"""Certify a one-run audit's canary scores and build its :class:`AuditResult` (docs/theory.md 9).

Every certified one-run estimator of the project runs on the same scores:
the f-DP test in the Gaussian family (Mahloujifar et al. 2024), the
(epsilon, delta) test (Steinke et al. 2023) and the tail bound of the
released guesses (Xiang et al. 2025, Gaussian family). The verdict uses the one the
audit named before the run (``one_run_method``, f-DP by default), each at the
audit's full confidence; the others are listed beside it. The Gaussian-pair
estimate (the two score groups read as two Gaussians, Agrawal et al. 2026) is
model-based, labelled so, and never used for a verdict.

The result records the design (``audit.design``) and a ``one_run`` section
whose ``statement`` and ``assumptions`` are the words every report prints.
Beside the certified bound the statement gives what canaries free of
interference would let the same test certify in this training (the median
of seeded draws from the training's last-iterate linear-loss surrogate laws,
``audit.statistics.one_run_ceiling``): a reference, not a bound. The
assumptions say how the canaries were drawn (Dirac coordinates, blocks of
them, or random directions) and how much their directions overlap.

References
----------
Steinke, Nasr, Jagielski, "Privacy Auditing with One (1) Training Run", NeurIPS 2023.
Mahloujifar, Melis, Chaudhuri, "Auditing f-Differential Privacy in One Run", arXiv:2410.22235, 2024.
Xiang, Wang, Xiao, Tian, Wang, "Tight Privacy Audit in One Run", arXiv:2509.08704, 2025.
Agrawal, Wei, Singh, Magdon-Ismail, Zikas, "Let's Ask Gauss: Improved One-Run Privacy Auditing",
arXiv:2606.12733, 2026.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from dpaudit.auditing.jobs.assemble import claim_entries
from dpaudit.auditing.jobs.fingerprint import code_version
from dpaudit.auditing.jobs.one_run_design import GRADIENT_SCORE, OneRunJob, train_and_score
from dpaudit.auditing.jobs.result import AuditResult, Empirical, EstimateEntry, IndexResult
from dpaudit.auditing.statistics.one_run_ceiling import FREE_LEVELS, FreeFigure, canary_overlap, interference_free
from dpaudit.auditing.statistics.one_run_fdp import METHODS, OneRunAudit, one_run_audit
from dpaudit.auditing.statistics.verdict import compare
from dpaudit.core.kinds import Relation
from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon

__all__ = ["METHOD_NAMES", "canary_sentence", "distributions_of", "free_figure", "gaussian_pair_estimate",
           "one_run_estimates", "one_run_result", "relation_of", "run_one_run"]

METHOD_NAMES = {"fdp": "one-run f-DP (Mahloujifar et al. 2024)", "steinke": "one-run (epsilon, delta) "
                "(Steinke et al. 2023)", "tail": "one-run tail bound (Xiang et al. 2025)"}


def relation_of(mechanism: Any) -> Relation:
    """The neighbouring relation of a canary against a zero-gradient record in this training."""
    relation = mechanism.pair_relation("zero")
    if relation is not None:
        return relation
    return Relation.ADD_REMOVE if mechanism.zero_record_is_absent else Relation.REPLACE_ONE


def gaussian_pair_estimate(scores: np.ndarray, included: np.ndarray, delta: float) -> dict[str, float | None]:
    """The model-based estimate: ``mu`` = difference of the groups' means over their pooled standard
    deviation, and the epsilon of mu-GDP at ``delta``. Not certified: it assumes the two score groups are
    Gaussians of one variance."""
    inside, outside = scores[included == 1], scores[included == 0]
    if inside.size < 2 or outside.size < 2:
        return {"mu": None, "epsilon": None}
    pooled = np.sqrt(((inside.size - 1) * inside.var(ddof=1) + (outside.size - 1) * outside.var(ddof=1))
                     / (inside.size + outside.size - 2))
    mu = float((inside.mean() - outside.mean()) / pooled) if pooled > 0 else None
    if mu is None or not np.isfinite(mu):
        return {"mu": None, "epsilon": None}
    epsilon = float(gaussian_epsilon(delta, mu)) if mu > 0 else 0.0
    return {"mu": mu, "epsilon": epsilon}


def one_run_estimates(scores: np.ndarray, included: np.ndarray, *, delta: float, confidence: float,
                      seed: int) -> dict[str, OneRunAudit]:
    """Every certified one-run estimator on the same scores, each at ``confidence``."""
    return {method: one_run_audit(scores, included, delta=delta, confidence=confidence, method=method, seed=seed)
            for method in METHODS}


def free_figure(job: OneRunJob, method: str) -> FreeFigure | None:
    """What ``method`` certifies on canaries free of interference in ``job``'s training: seeded draws of the
    training's last-iterate linear-loss surrogate laws (``audit.statistics.one_run_ceiling``), as many canaries
    as the audit pools; ``None`` where the training has no such laws (every iterate released)."""
    laws = job.mechanism.surrogate_output_laws()
    if laws is None or not hasattr(laws, "means_a"):
        return None
    settings = job.settings
    return interference_free(laws, canaries=job.canaries * job.runs, delta=settings.delta,
                             confidence=settings.confidence, method=method, seed=settings.seed)


def canary_sentence(job: OneRunJob) -> str:
    """How the canaries were drawn, and how much the directions of gradient canaries overlap."""
    m, parameters = job.canaries, job.mechanism.parameter_count
    if job.kind != "gradient":
        return ("each input canary is a record with random features of norm 1 and a random label, drawn from the "
                "seed before training")
    overlap = canary_overlap(m, parameters, job.directions)
    if job.directions == "random":
        return (f"each gradient canary is C times a uniform random unit direction of the {parameters} parameters, "
                f"drawn from the seed before training; each score carries {overlap:.3g} other canaries' gradients "
                f"on average (the sum of squared inner products of its direction with the others'; Dirac canaries: "
                f"{canary_overlap(m, parameters, 'dirac'):.3g})")
    head = (f"each gradient canary is C times one of the {parameters} parameters' coordinates with a sign (Dirac "
            f"canaries), coordinates and signs drawn from the seed before training")
    if m <= parameters:
        return f"{head}; the {m} coordinates are distinct, so no canary's score carries another's gradient"
    full = m // parameters
    blocks = f"{full} or {full + 1}" if m % parameters else f"{full}"
    return (f"{head}; the {m} canaries outnumber the parameters, so they share coordinates in blocks of {blocks}, "
            f"and each score carries {overlap:.3g} other canaries' gradients on average (any {m} directions in "
            f"{parameters} dimensions overlap by at least {m / parameters - 1:.3g})")


def _free_sentence(figure: FreeFigure | None, headline: OneRunAudit) -> str:
    if figure is None:
        return ""
    low, high = (f"{100 * level:g}%" for level in FREE_LEVELS)
    ratio = (f"; the certified bound is {headline.epsilon_lower_bound / figure.median:.2f} of it"
             if figure.median > 0 else "")
    return (f" Gradient canaries free of interference, each scored by this training's last-iterate linear-loss "
            f"surrogate laws, would let the same test certify about {figure.median:.3f} (the median of "
            f"{figure.draws} seeded draws of {figure.canaries} canaries, whose {low} and {high} quantiles are "
            f"{figure.low:.3f} and {figure.high:.3f}): a reference, not a bound{ratio}.")


def _assumptions(job: OneRunJob, headline: OneRunAudit, relation: Relation) -> list[str]:
    mech = job.mechanism
    absent = ("an excluded canary is a record whose gradient is zero, which Poisson sampling treats as no record"
              if mech.zero_record_is_absent else "an excluded canary is a record whose gradient is zero")
    items = [f"each canary was included with probability 1/2, independently, from the seed before training; "
             f"{absent} ({relation} neighbours)", canary_sentence(job)]
    if headline.method == "fdp":
        items.append(f"the tradeoff between including and excluding one canary lies in the Gaussian family "
                     f"(mu-GDP): the test certifies mu of at least {headline.mu_lower_bound:.4g}, and epsilon is the "
                     f"epsilon of that family at delta = {headline.delta:g}")
    elif headline.method == "tail":
        items.append(f"the canaries act as separate uses of one Gaussian (mu-GDP) channel read by the best decoder, "
                     f"as in the tail bound of Xiang et al. 2025: the test certifies mu of at least "
                     f"{headline.mu_lower_bound:.4g}, and epsilon is the epsilon of that family at delta = "
                     f"{headline.delta:g}")
    else:
        items.append("none about the mechanism beyond (epsilon, delta)-DP with respect to each canary")
    if headline.guess_rule == "calibrate":
        items.append(f"the number of guesses was chosen on {headline.failure_split['calibration_canaries']} "
                     f"calibration canaries and the bound certified on the other {headline.canaries}")
    elif headline.guess_rule == "union":
        items.append(f"the number of guesses is the best of {headline.failure_split['guess_counts_tried']} "
                     f"fixed counts, each tested at failure probability "
                     f"{headline.failure_split['per_count']:.3g} (a union bound)")
    if job.runs > 1:
        items.append(f"the {job.runs} training runs are independent and each canary is in one run only, so "
                     f"their canaries are pooled")
    items.append("the Gaussian-pair estimate is model-based: not certified, and the verdict does not use it")
    return items


def one_run_result(job: OneRunJob, scores: np.ndarray, included: np.ndarray, *, timings: dict[str, Any],
                   store: str | None = None) -> AuditResult:
    """Certify the pooled canary ``scores`` (inclusion bits ``included``) of ``job`` and build its result."""
    settings, mech = job.settings, job.mechanism
    estimates = one_run_estimates(scores, included, delta=settings.delta, confidence=settings.confidence,
                                  seed=settings.seed)
    headline = estimates[job.method]
    model = gaussian_pair_estimate(scores, included, settings.delta)
    relation = relation_of(mech)
    claims = claim_entries(mech, None, settings.delta)
    judged = compare(headline.epsilon_lower_bound, claims, str(relation))
    pooled = job.canaries * job.runs
    runs = "one training run" if job.runs == 1 else f"{job.runs} training runs"
    free = free_figure(job, headline.method)
    statement = (f"Certified with confidence {settings.confidence:g}: epsilon is at least "
                 f"{headline.epsilon_lower_bound:.3f} at delta = {settings.delta:g}, from {runs} with "
                 f"{pooled} {job.kind} canaries ({int(included.sum())} included), by the "
                 f"{METHOD_NAMES[headline.method]} test.{_free_sentence(free, headline)}")
    model_sentence = ("Model-based Gaussian-pair estimate (not certified; the verdict does not use it): if the "
                      "scores of included and excluded canaries were two Gaussians of one variance, mu would be "
                      f"{_fmt(model['mu'])} and epsilon at delta = {settings.delta:g} would be "
                      f"{_fmt(model['epsilon'])}.")
    entries = tuple(EstimateEntry(name=f"one-run-{method}", quantity="epsilon >=", value=bound.epsilon_lower_bound,
                                  method=METHOD_NAMES[method], confidence=bound.confidence, record=bound.to_dict())
                    for method, bound in estimates.items())
    empirical = Empirical(
        epsilon_lower_bound=headline.epsilon_lower_bound, mu_lower_bound=float(headline.mu_lower_bound or 0.0),
        confidence=settings.confidence, delta=settings.delta, trials=job.runs, method=f"one-run-{headline.method}",
        model_based_epsilon=model["epsilon"], epsilon=headline.to_dict(),
        gdp={"mu_lower_bound": headline.mu_lower_bound, "model_based_epsilon": model["epsilon"],
             "gaussian_pair_mu": model["mu"], "method": "gaussian-pair"},
        profile={}, estimates=entries)
    row = IndexResult(index=None, empirical=empirical, claims=judged.with_slack(claims), verdict=judged.verdict,
                      verdict_reason=judged.reason, violations=judged.violations, tightness=judged.tightness,
                      distributions=distributions_of(scores, included), ceiling=None,
                      theory_slack=judged.theory_slack())
    one_run = {"design": "one-run", "canaries": job.canaries, "runs": job.runs, "pooled_canaries": pooled,
               "included": int(included.sum()), "kind": job.kind, "method": headline.method,
               "directions": job.directions, "interference_free": free.to_dict() if free else None,
               "statement": statement, "assumptions": _assumptions(job, headline, relation),
               "model_based": model_sentence, "gaussian_pair": model}
    audit = {**settings.to_dict(), "trials": job.runs, "design": "one-run", "canaries": job.canaries,
             "runs": job.runs, "one_run_method": job.method}
    score = GRADIENT_SCORE if job.kind == "gradient" else "canary-loss"
    return AuditResult(
        audit_id=job.audit_id, title=job.title,
        mechanism={"name": mech.name, "params": mech.params, "inapplicable": sorted(mech.inapplicable()),
                   "release_grid": mech.release_grid},
        canary={**job.description.get("canary", {}), "kind": job.kind, "relation": str(relation), "indices": [None],
                "canaries": job.canaries, **({"directions": job.directions} if job.directions else {})},
        attack={"score": score}, audit=audit, seed=settings.seed, code_version=code_version(),
        code_fingerprint=job.code_fingerprint, config_source=job.source, empirical=empirical,
        claims=row.claims, per_index=(row,), verdict=row.verdict,
        verdict_reason=(row.verdict_reason if row.verdict != "violation"
                        else "violated claims: " + ", ".join(row.violations)),
        violations=row.violations, tightness=row.tightness, timings=timings, store=store,
        theory_slack=row.theory_slack, one_run=one_run)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def distributions_of(scores: np.ndarray, included: np.ndarray) -> dict[str, Any]:
    """The figures' histogram (S: ``included`` 1, S': 0) and ROC of ``scores`` (figures, not certified)."""
    edges = np.histogram_bin_edges(scores, bins=40)
    inside, outside = scores[included == 1], scores[included == 0]
    thresholds = np.quantile(scores, np.linspace(0, 1, 101))
    tpr = [float(np.mean(inside >= t)) if inside.size else 0.0 for t in thresholds]
    fpr = [float(np.mean(outside >= t)) if outside.size else 0.0 for t in thresholds]
    return {"histogram": {"edges": edges.tolist(), "a": np.histogram(inside, edges)[0].tolist(),
                          "b": np.histogram(outside, edges)[0].tolist()},
            "roc": {"fpr": fpr, "tpr": tpr}}


def run_one_run(job: OneRunJob, store: Any, *, store_path: str | None = None) -> AuditResult:
    """Run (or take from ``store``) every training run of ``job``, certify, and return the AuditResult."""
    started = time.perf_counter()
    audit_id = job.audit_id
    store.register_audit(audit_id, job.title, {"design": job.design, **dict(job.description)}, code_version())
    done = store.finished_chunks(audit_id)
    computed = 0
    for run in range(job.runs):
        if (0, "a", "cert", run) in done and (0, "b", "cert", run) in done:
            continue
        scores, included, seconds = train_and_score(job, run)
        store.put_chunk(audit_id, (0, "b", "cert", run), included, 0.0)
        store.put_chunk(audit_id, (0, "a", "cert", run), scores, seconds)
        computed += 1
    scores = store.get_chunks(audit_id, 0, "a", "cert")
    included = store.get_chunks(audit_id, 0, "b", "cert").astype(int)
    timings = {"seconds": time.perf_counter() - started, "chunk_seconds": store.chunk_seconds(audit_id),
               "chunks_computed": computed, "chunks_reused": job.runs - computed}
    result = one_run_result(job, scores, included, timings=timings, store=store_path)
    store.put_result(audit_id, result.to_dict())
    return result
