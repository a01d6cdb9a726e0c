"""Audits from Python: :func:`audit` runs one audit in memory and returns its result.

It builds an :class:`~dpaudit.auditing.jobs.job.AuditJob` and runs it through the
same runner as ``dpaudit run`` (an in-memory store, one worker by default),
so an audit from Python and one from a config with the same seed and chunk
size certify the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dpaudit.attacks.canaries import CanaryPair, CanarySpec
from dpaudit.auditing.jobs.job import AUDIT_DEFAULTS, AuditSettings, make_job
from dpaudit.auditing.jobs.result import AuditResult
from dpaudit.auditing.jobs.runner import RunOptions, run_audits
from dpaudit.auditing.jobs.store import MEMORY
from dpaudit.mechanisms.base import Mechanism
from dpaudit.core.errors import ParameterError

__all__ = ["audit", "make_job", "make_one_run_job"]


def make_one_run_job(mechanism: Mechanism | None, *, design: str, canaries: int | None, runs: int | None,
                     one_run_method: str | None, canary: Any, title: str | None, claimed_epsilon: float | None,
                     sequential: bool, given: Mapping[str, Any], **settings: Any) -> Any:
    """The ``OneRunJob`` of ``audit(..., design="one-run")``; arguments of the other design are refused."""
    from dpaudit.auditing.jobs.one_run_design import ONE_RUN_DEFAULTS, OneRunJob

    if design != "one-run":
        raise ParameterError(f"canaries, runs and one_run_method apply to design='one-run', got design={design!r}")
    if mechanism is None:
        raise ParameterError("a one-run audit needs a mechanism (dpaudit.make('model', ...))")
    refused = [name for name, value in given.items() if value] + [
        name for name in ("trials", "threshold", "chunk_size", "calibration_fraction") if name in settings]
    if refused:
        raise ParameterError(f"design='one-run' takes no {refused[0]} (one training run, canaries instead of trials)")
    unknown = sorted(set(settings) - set(AUDIT_DEFAULTS))
    if unknown:
        raise ParameterError(f"unknown audit setting {unknown[0]!r} (valid: delta, confidence, seed)")
    kind = "gradient"
    if canary is not None:
        fields = dict(canary) if isinstance(canary, Mapping) else {"kind": getattr(canary, "kind", None)}
        if set(fields) - {"kind"}:
            raise ParameterError(f"design='one-run' takes canary kind only, got {sorted(fields)}")
        kind = fields.get("kind") or "gradient"
    description = {"mechanism": {"name": mechanism.name, **mechanism.params}, "canary": {"kind": kind}}
    return OneRunJob(mechanism, ONE_RUN_DEFAULTS["canaries"] if canaries is None else canaries,
                     AuditSettings(**settings), title or f"{mechanism.label} one-run audit", description,
                     kind=kind, runs=ONE_RUN_DEFAULTS["runs"] if runs is None else runs,
                     method=one_run_method or ONE_RUN_DEFAULTS["one_run_method"], claimed_epsilon=claimed_epsilon,
                     sequential=bool(sequential))


def audit(mechanism: Mechanism | None = None, *, pair: CanaryPair | None = None,
          dataset_pair: Sequence[Any] | None = None, canary: CanarySpec | Mapping[str, Any] | None = None,
          index: Any = None, score: Any = None, title: str | None = None, store: str = MEMORY,
          workers: int = 1, progress: bool = False, estimators: Sequence[Any] = (), sequential: bool = False,
          claimed_epsilon: float | None = None, search: Mapping[str, Any] | bool | None = None,
          design: str = "many-runs", canaries: int | None = None, runs: int | None = None,
          one_run_method: str | None = None, **settings: Any) -> AuditResult:
    """Audit ``mechanism`` and return the :class:`AuditResult`.

    Parameters
    ----------
    mechanism : Mechanism, optional
        A built-in mechanism (``dpaudit.make``), a subclass of your own, or
        a function wrapped with ``dpaudit.from_callable``.
    pair : CanaryPair, optional
        A ready neighbouring pair (its mechanism is audited).
    dataset_pair : (array_like, array_like), optional
        Neighbouring datasets ``(S, S')`` for a mechanism without canaries
        (e.g. ``from_callable``).
    canary : CanarySpec or mapping, optional
        The canary (default: the mechanism's own tightest, at its last position).
    index : int, list of int or "all", optional
        Canary position(s), 1-based; overrides ``canary.index``.
    score : str, Score or list of them, optional
        A registered score's name (``dpaudit.attacks.scores.SCORES``), a score object of the
        ``dpaudit.attacks.scores.Score`` protocol (``name`` and ``fit(pair, calibration_a,
        calibration_b, seed)``; it need not be registered), or a list of either: a portfolio, of which
        one score is chosen on calibration trials (docs/theory.md 3.6). Default ``"auto"``: every
        registered score that applies (projection, gaussian, logistic, mlp, float-bits, exact, the
        model scores, discrete, median, and any score another module registers).
    estimators : sequence of Estimator, optional
        Estimators run after the built-ins (``dpaudit.auditing.statistics.certify.Estimator``: ``name``, ``plan``,
        ``finish``); each shows in ``result.empirical.estimates`` and the reports.
    sequential : bool
        Look at the data after 1, 2, 4, ... certification chunks (planned from the budget), the final
        look at confidence ``1 - beta / 2`` and the earlier ones sharing the other half of ``beta``
        (docs/theory.md 3.7), and stop at the first certified violation
        (``result.sequential`` records the looks).
    claimed_epsilon : float, optional
        A claim to stop at as well (a certified bound above it is a violation of the caller's claim).
    search : bool or mapping, optional
        Search for the neighbouring pair instead of taking one (``dpaudit.search``, docs/theory.md
        3.8): ``True``, or a mapping of its options (``record_domain``, ``thresholds``,
        ``screen_trials``, ...). The result is the certifying audit of the strongest pair; the
        screening table is :func:`dpaudit.search`'s.
    design : {"many-runs", "one-run"}
        ``"one-run"``: train once with ``canaries`` canaries, each included with probability 1/2, and
        certify from their scores (``audit.jobs.one_run_design``, docs/theory.md 9); mechanism ``model`` only.
        ``canary={"kind": "input"}`` inserts input canaries (black box) instead of gradient canaries.
    canaries, runs, one_run_method : optional
        Of the one-run design: canaries per run (default 1000), training runs pooled (default 1), and
        the estimator the verdict uses (``"fdp"``, default, or ``"steinke"``).
    store : str
        ``":memory:"`` (default) or an SQLite file to keep and reuse chunks.
    workers : int
        Worker processes (default 1: in this process).
    **settings
        ``trials``, ``delta``, ``confidence``, ``seed``, ``threshold``,
        ``chunk_size``, ``calibration_fraction`` (defaults as in configs).
        ``calibration_fraction`` (default 0.1) is the least share of the trials
        the scores are fitted and the tests placed on: a fitted score may ask
        for more (the ``discrete`` score, 0.3), and ``attack["calibration_trials"]``
        in the result says how many calibrated.

    Returns
    -------
    AuditResult

    Examples
    --------
    >>> import dpaudit
    >>> result = dpaudit.audit(dpaudit.make("gaussian", sigma=2.0), trials=20_000)  # doctest: +SKIP
    >>> result.verdict, round(result.epsilon_lower_bound, 2)                        # doctest: +SKIP
    ('consistent', 0.94)
    """
    if search:
        given = [name for name, value in (("pair", pair), ("dataset_pair", dataset_pair), ("canary", canary),
                                          ("index", index), ("estimators", estimators)) if value]
        if given or sequential or store != MEMORY or workers != 1:
            raise ParameterError(f"search chooses the pair itself and runs in memory; it takes no "
                                 f"{', '.join(given) or 'sequential, store or workers'}")
        from dpaudit.auditing.checks.search import search as search_pairs

        unknown = sorted(set(settings) - {"trials", "delta", "confidence", "seed"})
        if unknown:
            raise ParameterError(f"search takes the settings trials, delta, confidence and seed, got {unknown[0]!r}")
        options = dict(search) if isinstance(search, Mapping) else {}
        return search_pairs(mechanism, score=score, title=title, epsilon=claimed_epsilon, **options,
                            **settings).result
    if design == "one-run" or canaries is not None or runs is not None or one_run_method is not None:
        job = make_one_run_job(mechanism, design=design, canaries=canaries, runs=runs,
                               one_run_method=one_run_method, canary=canary, title=title,
                               claimed_epsilon=claimed_epsilon, sequential=sequential,
                               given={"pair": pair, "dataset_pair": dataset_pair, "index": index, "score": score,
                                      "estimators": estimators}, **settings)
        return run_audits([job], RunOptions(store=str(store), workers=workers, progress=progress))[0]
    if design != "many-runs":
        raise ParameterError(f"design must be 'many-runs' or 'one-run', got design={design!r}")
    job = make_job(mechanism, pair=pair, dataset_pair=dataset_pair, canary=canary, index=index, score=score,
                   title=title, estimators=estimators, sequential=sequential, claimed_epsilon=claimed_epsilon,
                   **settings)
    return run_audits([job], RunOptions(store=str(store), workers=workers, progress=progress))[0]
