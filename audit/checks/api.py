"""Audits from Python: :func:`audit` runs one audit in memory and returns its result.

What is audited (the mechanism, its pair or canary, the score) and what every design shares (delta,
confidence, seed, the claim, title, store, workers) are its arguments; *how* it is audited is a design
object (:mod:`dpaudit.auditing.checks.designs`: ``ManyRuns``, ``OneRun``, ``PairSearch``), whose ``run``
it calls. The older keywords (``design="one-run"``, ``canaries=``, ``search=``, ``sequential=``,
``trials=``, ...) spell such an object (``design_from_keywords``). A many-runs audit goes through the
same runner as ``dpaudit run`` (an in-memory store, one worker by default), so an audit from Python and
one from a config with the same seed and chunk size certify the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from dpaudit.attacks.canaries import CanaryPair, CanarySpec
from dpaudit.auditing.checks.designs import AuditDesign, AuditOptions, AuditTarget, design_from_keywords
from dpaudit.auditing.jobs.job import make_job
from dpaudit.auditing.jobs.job_designs import COMMON_SETTINGS
from dpaudit.auditing.jobs.result import AuditResult
from dpaudit.auditing.jobs.store import MEMORY
from dpaudit.mechanisms.base import Mechanism

__all__ = ["audit", "make_job"]


def audit(mechanism: Mechanism | None = None, *, pair: CanaryPair | None = None,
          dataset_pair: Sequence[Any] | None = None, canary: CanarySpec | Mapping[str, Any] | None = None,
          index: Any = None, score: Any = None, title: str | None = None, store: str = MEMORY,
          workers: int = 1, progress: bool | None = None, estimators: Sequence[Any] = (),
          claimed_epsilon: float | None = None, design: AuditDesign | str = "many-runs",
          sequential: bool = False, search: Mapping[str, Any] | bool | None = None, canaries: int | None = None,
          runs: int | None = None, one_run_method: str | None = None, **settings: Any) -> AuditResult:
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
    claimed_epsilon : float, optional
        A claim to stop at as well (a certified bound above it is a violation of the caller's claim).
    design : AuditDesign, "many-runs" or "one-run"
        How to audit: ``dpaudit.ManyRuns(...)`` (the default: many trainings, ``trials`` per dataset),
        ``dpaudit.OneRun(...)`` (one training with canaries, mechanism ``model`` only; docs/theory.md 9),
        ``dpaudit.PairSearch(...)`` (search for the neighbouring pair, then certify it; docs/theory.md 3.8),
        or any object with ``run(target, options)`` (:class:`dpaudit.auditing.checks.designs.AuditDesign`).
        A design object holds its own settings: the keywords below are then refused. The names
        ``"many-runs"`` and ``"one-run"`` take their settings from those keywords.
    sequential : bool
        ``ManyRuns(sequential=True)``: look at the data after 1, 2, 4, ... certification chunks (planned from
        the budget; docs/theory.md 3.7) and stop at the first certified violation (``result.sequential``
        records the looks).
    search : bool or mapping, optional
        ``PairSearch(**search)``: ``True``, or a mapping of its options (``record_domain``, ``thresholds``,
        ``screen_trials``, ...). The result is the certifying audit of the strongest pair; the screening
        table is :func:`dpaudit.search`'s.
    canaries, runs, one_run_method : optional
        With ``design="one-run"``: ``OneRun(canaries, runs, method)``, canaries per run (default 1000),
        training runs pooled (default 1) and the test the verdict uses (``"fdp"``, default, ``"steinke"``
        or ``"tail"``); ``canary={"kind": "input"}`` is ``OneRun(kind="input")``.
    store : str
        ``":memory:"`` (default) or an SQLite file to keep and reuse chunks.
    workers : int
        Worker processes (default 1: in this process).
    progress : bool, optional
        Show progress bars on standard error. Default: when standard error is a terminal, or as the
        environment variable ``DPAUDIT_PROGRESS`` says (``0``: off; ``dpaudit.core.progress``).
    **settings
        ``delta``, ``confidence``, ``seed`` (every design's), and the design's own: ``trials``,
        ``threshold``, ``chunk_size``, ``calibration_fraction`` (``ManyRuns``; defaults as in configs),
        ``trials`` (``PairSearch``). ``calibration_fraction`` (default 0.1) is the least share of the
        trials the scores are fitted and the tests placed on: a fitted score may ask for more (the
        ``discrete`` score, 0.3), and ``attack["calibration_trials"]`` in the result says how many
        calibrated.

    Returns
    -------
    AuditResult

    Examples
    --------
    >>> import dpaudit
    >>> result = dpaudit.audit(dpaudit.make("gaussian", sigma=2.0), trials=20_000)  # doctest: +SKIP
    >>> result.verdict, round(result.epsilon_lower_bound, 2)                        # doctest: +SKIP
    ('consistent', 0.94)
    >>> same = dpaudit.audit(dpaudit.make("gaussian", sigma=2.0),
    ...                      design=dpaudit.ManyRuns(trials=20_000))                # doctest: +SKIP

    References
    ----------
    docs/theory.md 3 (many-runs audits), 3.7, 3.8, 9; audit/checks/designs.py.
    """
    common = {key: settings.pop(key) for key in COMMON_SETTINGS if key in settings}
    chosen = design_from_keywords(design, search=search, sequential=sequential, canaries=canaries, runs=runs,
                                  one_run_method=one_run_method, canary=canary, **settings)
    target = AuditTarget(mechanism, pair=pair, dataset_pair=dataset_pair, canary=canary, index=index, score=score,
                         estimators=estimators)
    options = AuditOptions(**common, claimed_epsilon=claimed_epsilon, title=title, store=str(store), workers=workers,
                           progress=progress)
    return chosen.run(target, options)
