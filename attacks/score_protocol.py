"""The protocol a score implements: :class:`Score`, its optional members, and the check where one enters.

A user score needs no base class: any object with a ``name`` and a ``fit``
method is a score (docs/guide.md shows a minimal one). Optional members are
read by name here, and only here; :func:`check_score` refuses a member of the
wrong type with a message naming it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np

from dpaudit.attacks.canaries import CanaryPair
from dpaudit.core.errors import ParameterError

__all__ = ["TAIL_MODELS", "Score", "ScoreFunction", "check_score", "score_arithmetic", "fitted_calibration_share", "fitted_declined",
           "fitted_tail_model", "score_applies", "score_fitted", "score_needs_calibration"]

#: How a fitted score's calibration rates place the epsilon test: as counted, by its exponential tilt
#: (``audit.statistics.tilt``), or hedged: the counts' test, the thin tail's and the tilt's certified together
#: under a union bound (``audit.statistics.hedged``)
TAIL_MODELS = ("calibration", "tilt", "hedged")
#: What :meth:`Score.fit` returns: a batch of outputs ``(trials, dim)`` -> one score per trial.
ScoreFunction = Callable[[np.ndarray], np.ndarray]


@runtime_checkable
class Score(Protocol):
    """A distinguishing score: ``fit`` on calibration outputs returns ``outputs -> one number per trial``.

    Attributes
    ----------
    name : str
        Non-empty; how results, reports and ``score="name"`` (once registered) refer to it.
    needs_calibration : bool, optional
        Whether :meth:`fit` reads the calibration outputs (default True). False lets calibration
        keep one score per trial instead of whole outputs; ``fit`` is then called with ``None``.

    Methods
    -------
    fit(pair, calibration_a, calibration_b, seed) -> ScoreFunction
        Required; see below.
    applies(pair) -> str or None, optional
        Why the score cannot run on ``pair`` (a portfolio skips it), or None when it can
        (default: it always can).

    Notes
    -----
    Only ``name`` and ``fit`` are members of the protocol class (``isinstance`` checks them);
    the optional members are read by :func:`score_needs_calibration` and :func:`score_applies`
    and checked by :func:`check_score`. An attribute named ``fitted`` means nothing to dpaudit.
    """

    name: str

    def fit(self, pair: CanaryPair, calibration_a: np.ndarray | None, calibration_b: np.ndarray | None,
            seed: int) -> ScoreFunction:
        """The fitted score (larger under ``S'``); ``calibration_*`` are outputs of calibration trials."""


def check_score(score: object) -> Score:
    """``score`` itself once its members have the protocol's types; a :class:`ParameterError` naming the member.

    Raises
    ------
    ParameterError
        When ``score`` lacks ``name`` or ``fit``, its name is not a non-empty string, ``fit`` or
        ``applies`` is not callable, or ``needs_calibration`` is not a bool (it is never coerced:
        a counter or a string there is a mistake, not a yes or no).
    """
    if not isinstance(score, Score) or not isinstance(score.name, str) or not score.name:
        raise ParameterError(f"a score needs a name (a non-empty string) and fit(pair, calibration_a, "
                             f"calibration_b, seed), got score={score!r}")
    label = f"score {score.name!r}"
    if not callable(score.fit):
        raise ParameterError(f"{label}: fit must be a method, got fit={score.fit!r}")
    applies = getattr(score, "applies", None)
    if applies is not None and not callable(applies):
        raise ParameterError(f"{label}: applies must be a method applies(pair) -> reason or None, "
                             f"got applies={applies!r}")
    if hasattr(score, "needs_calibration"):
        flag = score.needs_calibration
        if not isinstance(flag, (bool, np.bool_)):
            raise ParameterError(f"{label}: needs_calibration must be True or False, got "
                                 f"needs_calibration={flag!r} ({type(flag).__name__})")
    elif isinstance(getattr(score, "fitted", None), (bool, np.bool_)):
        warnings.warn(f"{label} sets fitted={score.fitted!r}, which is no longer read: the flag is "
                      f"needs_calibration (default True)", DeprecationWarning, stacklevel=3)
    return score


def score_needs_calibration(score: Score) -> bool:
    """Whether ``score`` reads calibration outputs in ``fit``.

    The optional ``needs_calibration`` member, default True; a value that is not a bool is refused
    (:func:`check_score`). No other attribute is read.
    """
    score = check_score(score)
    return bool(getattr(score, "needs_calibration", True))


def score_fitted(score: Score) -> bool:
    """Deprecated name of :func:`score_needs_calibration`."""
    warnings.warn("score_fitted is now score_needs_calibration", DeprecationWarning, stacklevel=2)
    return score_needs_calibration(score)


def score_applies(score: Score, pair: CanaryPair) -> str | None:
    """Why ``score`` cannot run on ``pair``, or None when it can (a score without ``applies`` always can)."""
    check = getattr(score, "applies", None)
    return None if check is None else check(pair)


def fitted_tail_model(function: ScoreFunction) -> str:
    """How the calibration rates of a score place the epsilon test (``audit.statistics.tilt``).

    A score function (fitted or not) may carry ``tail_model = "tilt"``: its log likelihood ratio is close to
    a straight line in its value (a count of signs, ``attacks.medians``; the projection of a release whose
    law is a Gaussian shift, ``attacks.scores``), so the test is placed by the exponential tilt fitted to its
    calibration scores where they do not reject it. ``"hedged"``: a few tests
    placed in different ways are certified together (``audit.statistics.hedged``; the ``discrete`` score).
    Without the attribute: ``"calibration"`` (the calibration rates as counted).

    Raises
    ------
    ParameterError
        When ``tail_model`` is set to anything else.
    """
    model = getattr(function, "tail_model", "calibration")
    if model not in TAIL_MODELS:
        raise ParameterError(f"a fitted score's tail_model must be one of {', '.join(TAIL_MODELS)}, got "
                             f"tail_model={model!r}")
    return model


def fitted_calibration_share(function: ScoreFunction) -> float:
    """The share of the trials a fitted score asks to be calibrated on (0: no request).

    A fitted score function may carry ``calibration_share``: the runner (``audit.jobs.runner``) then
    draws that share of the trials as calibration (out of the certification part) when the
    ``calibration_fraction`` setting is smaller, and fits again on all of it. The ``discrete`` score asks
    for ``attacks.discrete.CALIBRATION_SHARE``: it fits many effects, each about as large as its noise.

    Raises
    ------
    ParameterError
        When ``calibration_share`` is not a number in [0, 0.5).
    """
    share = getattr(function, "calibration_share", 0.0)
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 <= share < 0.5:
        raise ParameterError(f"a fitted score's calibration_share must be a number in [0, 0.5), got "
                             f"calibration_share={share!r}")
    return float(share)


def fitted_declined(function: ScoreFunction) -> str | None:
    """Why a fitted score has nothing to read in the calibration outputs it was fitted on, or None.

    A fitted score function may carry ``declined``, a reason (``float-bits`` on outputs that lie on a
    coarse grid: no bit below the grid carries anything, ``attacks.float_bits.grid_reason``). A portfolio
    then skips it, listing the reason (``audit.statistics.portfolio``); a score named alone still runs.

    Raises
    ------
    ParameterError
        When ``declined`` is set to anything but a non-empty string or None.
    """
    reason = getattr(function, "declined", None)
    if reason is not None and not (isinstance(reason, str) and reason):
        raise ParameterError(f"a fitted score's declined must be a reason (a non-empty string) or None, got "
                             f"declined={reason!r}")
    return reason


def score_arithmetic() -> np.errstate:
    """The floating-point error state scores are fitted and evaluated under: overflow, invalid values and
    division by zero give inf or NaN quietly instead of NumPy's warnings on the screen.

    Quiet because it is harmless: a score whose values are not finite is never used silently. A candidate
    of a portfolio that gives such values is listed as not applicable with the reason, and a chosen score
    that gives one on a certification chunk stops the audit with the trial's seed (``audit.jobs.chunk_checks``).
    The mechanism's own sampling (user code) keeps the caller's error state.
    """
    return np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore")
