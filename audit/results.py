"""The result document of one audit (DESIGN.md: JSON keys that must not change).

With ``K`` canary positions each position is certified at confidence
``1 - beta / K`` (a union bound), so that every per-index statement, and the
top-level verdict "some index violates a claim", hold simultaneously at the
audit's confidence ``1 - beta``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpaudit.attacks.canaries import CanaryPair
from dpaudit.audit.config import AuditConfig, code_version
from dpaudit.audit.core import PROFILE_EPSILONS, certify_scores
from dpaudit.audit.verdict import combine, judge
from dpaudit.mechanisms.accounting.claims import evaluate_claims

__all__ = ["SCHEMA_VERSION", "build_document", "distributions"]

SCHEMA_VERSION = 1


def distributions(cert_a: np.ndarray, cert_b: np.ndarray, bins: int = 60, points: int = 200) -> dict[str, Any]:
    """A compact ROC (FPR, TPR at score thresholds) and histograms of both score arrays."""
    pooled = np.concatenate([cert_a, cert_b])
    low, high = np.quantile(pooled, [0.0005, 0.9995])
    edges = np.linspace(low, high, bins + 1) if high > low else np.linspace(low - 1, low + 1, bins + 1)
    thresholds = np.unique(np.quantile(pooled, np.linspace(0, 1, points)))
    sorted_a, sorted_b = np.sort(cert_a), np.sort(cert_b)
    fpr = 1 - np.searchsorted(sorted_a, thresholds, side="left") / sorted_a.size
    tpr = 1 - np.searchsorted(sorted_b, thresholds, side="left") / sorted_b.size
    return {
        "roc": {"fpr": fpr.tolist(), "tpr": tpr.tolist()},
        "histogram": {"edges": edges.tolist(),
                      "a": np.histogram(cert_a, edges)[0].tolist(),
                      "b": np.histogram(cert_b, edges)[0].tolist()},
    }


def _empirical(results: dict[str, Any], trials: int) -> dict[str, Any]:
    eps, gdp, profile = results["epsilon"], results["gdp"], results["profile"]
    return {
        "epsilon_lower_bound": eps.epsilon_lower_bound,
        "mu_lower_bound": gdp.mu_lower_bound,
        "confidence": eps.confidence,
        "delta": eps.delta,
        "trials": trials,
        "method": eps.method,
        "model_based_epsilon": gdp.model_based_epsilon,
        "epsilon": eps.to_dict(),
        "gdp": gdp.to_dict(),
        "profile": profile.to_dict(),
    }


def _exact(config: AuditConfig, pair: CanaryPair, audit: dict[str, Any], certified: int,
           confidence: float) -> dict[str, Any] | None:
    """The exact value of a one-dimensional instance and its statistical ceiling (THEORY.md 3.4, 5)."""
    from dpaudit.mechanisms.accounting.instances import NotExact, exact_ceiling, exact_epsilon, exact_laws

    try:
        laws = exact_laws(pair.mechanism, pair.dataset_a, pair.dataset_b)  # propagated once, used twice
        value = exact_epsilon(pair.mechanism, pair.dataset_a, pair.dataset_b, audit["delta"], laws=laws)
        ceiling = exact_ceiling(pair.mechanism, pair.dataset_a, pair.dataset_b, trials=certified,
                                delta=audit["delta"], confidence=confidence, laws=laws)
    except NotExact:
        return None
    claim = {"name": "exact-instance", "citation": "numerical E_gamma of this instance (THEORY.md 5, exact1d)",
             "relation": pair.relation, "kind": "exact-instance", "applicable": True, "reason": "",
             "index": pair.index, "epsilon": value if value != float("inf") else None, "delta": audit["delta"],
             "notes": ["the exact value of this instance (a lower bound on the worst case), not a guarantee"]}
    return {"claim": claim, "ceiling": ceiling}


def build_document(config: AuditConfig, pairs: dict[int, CanaryPair], scores: dict[int, dict[str, np.ndarray]],
                   *, timings: dict[str, Any], store: str | None = None) -> dict[str, Any]:
    """Certify every canary position, evaluate claims and verdicts, and assemble the document."""
    audit = config.audit
    beta = 1 - audit["confidence"]
    per_index_confidence = 1 - beta / len(pairs)
    per_index = []
    for index, pair in sorted(pairs.items()):
        part = scores[index]
        results = certify_scores(part["cal_a"], part["cal_b"], part["cert_a"], part["cert_b"],
                                 delta=audit["delta"], confidence=per_index_confidence,
                                 threshold=audit["threshold"], seed=audit["seed"])
        claim_objects = config.mechanism.claims(index=pair.index)
        claims = evaluate_claims(claim_objects, delta=audit["delta"])
        for claim, entry in zip(claim_objects, claims):
            if entry["applicable"]:
                entry["profile"] = {"epsilons": list(PROFILE_EPSILONS),
                                    "deltas": [claim.delta(e) for e in PROFILE_EPSILONS]}
        exact = _exact(config, pair, audit, part["cert_a"].size, per_index_confidence)
        if exact is not None:
            claims.append(exact["claim"])
        empirical = _empirical(results, audit["trials"])
        judged = judge(empirical["epsilon_lower_bound"], claims, pair.relation)
        per_index.append({
            "index": pair.index, "empirical": empirical, "claims": claims, "verdict": judged["verdict"],
            "verdict_reason": judged["reason"], "violations": judged["violations"],
            "tightness": judged["tightness"], "distributions": distributions(part["cert_a"], part["cert_b"]),
            "ceiling": exact["ceiling"] if exact else None,
        })
    top = max(per_index, key=lambda row: row["empirical"]["epsilon_lower_bound"])
    verdict = combine([row["verdict"] for row in per_index])
    violations = sorted({f"{name}@{row['index']}" if row["index"] is not None else name
                         for row in per_index for name in row["violations"]})
    first_pair = next(iter(pairs.values()))
    return {
        "schema_version": SCHEMA_VERSION,
        "audit_id": config.audit_id,
        "title": config.title,
        "mechanism": {"name": config.mechanism.name, "params": config.mechanism.params},
        "canary": {**config.resolved["canary"], "kind": first_pair.kind, "relation": first_pair.relation,
                   "indices": [row["index"] for row in per_index]},
        "attack": dict(config.resolved["attack"]),
        "audit": dict(audit),
        "seed": audit["seed"],
        "code_version": code_version(),
        "config_source": config.source,
        "empirical": {**top["empirical"], "index": top["index"], "confidence": audit["confidence"],
                      "per_index_confidence": per_index_confidence},
        "claims": top["claims"],
        "per_index": per_index,
        "verdict": verdict,
        "verdict_reason": (top["verdict_reason"] if verdict != "violation" else
                           "violated claims: " + ", ".join(violations)),
        "violations": violations,
        "tightness": top["tightness"],
        "timings": timings,
        "store": store,
    }
