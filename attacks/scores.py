"""Distinguishing scores: map a batch of outputs to one number per trial (larger under ``S'``).

A score is an object of the :class:`Score` protocol: a ``name`` and
``fit(pair, calibration_a, calibration_b, seed) -> callable(outputs) -> scores``.
Fitted scores see calibration trials only (the runner never passes the
trials that certify the bound). Two optional members refine it:
``needs_calibration`` (a bool; False when ``fit`` ignores the calibration
outputs, so calibration stores scores instead of outputs; default True) and
``applies(pair) -> reason or None`` (why the score cannot run on this pair;
an audit's portfolio skips it; default: it applies). :func:`check_score`
checks them where a score object enters (``dpaudit.audit``, configs through
:func:`register_score`): a member of the wrong type is refused, never coerced.

The built-ins are instances of :class:`BuiltinScore`; :func:`register_score`
makes any other score reachable by name (configs, ``score="name"``), refusing
a name already taken. A score object can also be passed directly
(``dpaudit.audit(..., score=obj)``) without registering it.

========== ==========================================================
projection ``<output, direction>`` of the canary (no fitting)
gaussian   log-likelihood ratio of Gaussians fitted to each dataset
logistic   logistic regression on standardised outputs (``attacks.classifiers``: NumPy, L-BFGS-B)
mlp        a small two-layer network (``attacks.classifiers``: torch, Adam)
exact      the mechanism's own exact log-likelihood ratio, if it has one
float-bits bit patterns of the released floats (``attacks.float_bits``)
step-*     every released step read apart (``attacks.steps``: step-max, step-mixture)
discrete   few-valued and mixed outputs: outcome counts or encoded classifier (``attacks.discrete``)
========== ==========================================================
"""

from __future__ import annotations

import dataclasses
import importlib
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np

from dpaudit.attacks.canaries import CanaryPair
from dpaudit.attacks.classifiers import fit_logistic, fit_mlp
from dpaudit.attacks.float_bits import fit_float_bits
from dpaudit.attacks.score_protocol import (
    Score,
    ScoreFunction,
    check_score,
    score_applies,
    score_fitted,
    score_needs_calibration,
)
from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import suggestion

__all__ = ["AUTO", "BuiltinScore", "SCORES", "Score", "ScoreFunction", "check_score", "fit_classifier", "fit_score",
           "get_score", "is_fitted", "register_score", "registered_scores", "resolve_scores", "score_applies",
           "score_fitted", "score_needs_calibration"]

_MAX_FIT = 200_000  # calibration trials used to fit a learned score


@dataclasses.dataclass(frozen=True)
class BuiltinScore:
    """A score of the package: a name, a summary, whether it reads calibration outputs, its fit and applicability."""

    name: str
    summary: str
    needs_calibration: bool
    _fit: Callable[[CanaryPair, np.ndarray | None, np.ndarray | None, int], ScoreFunction] = \
        dataclasses.field(repr=False)
    _applies: Callable[[CanaryPair], str | None] = dataclasses.field(default=lambda pair: None, repr=False)
    #: False when :meth:`applies` only keeps the score out of a portfolio (it still runs when named).
    strict: bool = True

    def applies(self, pair: CanaryPair) -> str | None:
        """Why this score cannot run on ``pair`` (None: it can)."""
        return self._applies(pair)

    def fit(self, pair: CanaryPair, calibration_a: np.ndarray | None = None,
            calibration_b: np.ndarray | None = None, seed: int = 0) -> ScoreFunction:
        reason = self.applies(pair) if self.strict else None
        if reason:
            raise ParameterError(reason)
        if self.needs_calibration:
            if calibration_a is None or calibration_b is None or len(calibration_a) < 2 or len(calibration_b) < 2:
                raise ParameterError(f"score {self.name!r} is fitted and needs calibration trials on both datasets")
            calibration_a = np.asarray(calibration_a, dtype=float)[:_MAX_FIT]
            calibration_b = np.asarray(calibration_b, dtype=float)[:_MAX_FIT]
        return self._fit(pair, calibration_a, calibration_b, seed)


def _projection(pair, cal_a, cal_b, seed):
    direction = np.asarray(pair.direction, dtype=float)

    def projection(outputs: np.ndarray) -> np.ndarray:
        return np.asarray(outputs, dtype=float) @ direction

    # a mechanism whose release is a Gaussian shift between the datasets (``projection_tail_model``, e.g. a
    # full-batch training) has a projection whose log likelihood ratio is linear in it: its test is placed by
    # the exponential tilt of the calibration scores, where they do not reject it (``audit.statistics.tilt``)
    projection.tail_model = pair.mechanism.projection_tail_model
    return projection


def _exact(pair, cal_a, cal_b, seed):
    mechanism = pair.mechanism

    def exact(outputs: np.ndarray) -> np.ndarray:
        return mechanism.log_likelihood_ratio(np.asarray(outputs, dtype=float), pair.dataset_a, pair.dataset_b)

    # scores drawn from the mechanism's known laws, to choose thresholds on (``audit.jobs.runner``; NotExact: none)
    exact.reference = lambda size, seed=0: mechanism.reference_scores(pair.dataset_a, pair.dataset_b, size, seed)
    # the closed-form likelihood ratio of the whole release is the optimal test: a portfolio takes it without a
    # contest (``audit.statistics.portfolio``), as it takes the discrete score's outcome table
    exact.preferred = bool(mechanism.exact_score_reads_whole_output)
    exact.preferred_reason = "the mechanism's closed-form likelihood ratio of the whole release: the Neyman-Pearson test"
    return exact


def _exact_applies(pair: CanaryPair) -> str | None:
    if pair.mechanism.has_log_likelihood_ratio:
        return None
    return f"score 'exact' needs a mechanism with an exact likelihood ratio, {pair.mechanism.name!r} has none"


def _record_applies(name: str) -> Callable[[CanaryPair], str | None]:
    def applies(pair: CanaryPair) -> str | None:
        if not pair.mechanism.trains_model:
            return (f"score {name!r} reads a record's loss under the released model, which needs a mechanism "
                    f"that evaluates its models on a record (a record_score hook: dpaudit's 'model' has one); "
                    f"{pair.mechanism.name!r} has none")
        if pair.kind != "input" or pair.index is None:
            return (f"score {name!r} scores the canary record: it needs canary kind 'input' at a position, "
                    f"got kind={pair.kind!r}")
        return None
    return applies


def _record(name: str):
    def fit(pair, cal_a, cal_b, seed):
        """The canary record's loss or logit margin under the model each output describes (a mechanism hook)."""
        record = np.array(pair.dataset_a.records[pair.index - 1])
        mechanism = pair.mechanism
        return lambda outputs: mechanism.record_score(np.asarray(outputs, dtype=float), record, name)
    return fit


def _float_bits_applies(pair: CanaryPair) -> str | None:
    """Outside a portfolio where outputs are snapped to a grid (their low bits carry nothing by construction);
    named explicitly, it still runs (a check that the snapping works)."""
    if pair.mechanism.release_grid is None:
        return None
    return (f"score 'float-bits' looks for leaks in the low bits of released floats; {pair.mechanism.name!r} "
            f"snaps its outputs to a grid of {pair.mechanism.release_grid:g}")


_BUILTINS = (
    BuiltinScore("projection", "projection of the output on the canary direction", False, _projection),
    BuiltinScore("gaussian", "log-likelihood ratio of Gaussians fitted on calibration trials", True,
                 lambda pair, a, b, seed: _fit_gaussian(a, b)),
    BuiltinScore("logistic", "logistic regression fitted on calibration trials", True,
                 lambda pair, a, b, seed: fit_logistic(a, b, seed=seed)),
    BuiltinScore("mlp", "small neural network fitted on calibration trials", True,
                 lambda pair, a, b, seed: fit_mlp(a, b, hidden=32, seed=seed)),
    BuiltinScore("exact", "exact log-likelihood ratio supplied by the mechanism", False, _exact, _exact_applies),
    BuiltinScore("float-bits", "floating-point distinguisher: value windows crossed with significand bits", True,
                 lambda pair, a, b, seed: fit_float_bits(a, b), _float_bits_applies, strict=False),
    BuiltinScore("canary-loss", "loss of the canary record under each trial's trained model (input canaries of "
                 "models)", False, _record("canary-loss"), _record_applies("canary-loss")),
    BuiltinScore("logit-margin", "logit margin of the canary record's label under each trial's trained model",
                 False, _record("logit-margin"), _record_applies("logit-margin")),
)
_REGISTRY: dict[str, Score] = {score.name: score for score in _BUILTINS}
#: Modules of the package that define more scores (each calls :func:`register_score` once per score);
#: imported on the registry's first use, so importing this module registers nothing elsewhere.
SCORE_MODULES: tuple[str, ...] = ("dpaudit.attacks.steps", "dpaudit.attacks.discrete", "dpaudit.attacks.medians",
                                 "dpaudit.attacks.scale")
_loaded = False


def _load() -> dict[str, Score]:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in SCORE_MODULES:
            importlib.import_module(module)
        _put_in_canonical_order()
    return _REGISTRY


def _put_in_canonical_order() -> None:
    """Order the registry: this module's scores, then each of :data:`SCORE_MODULES`' in that order, then any
    other in the order it was registered. A module of ``SCORE_MODULES`` imported early (directly, by a user)
    registers its scores early; without this the default portfolio's order, and with it an audit's id and the
    portfolio's tie-breaks, would depend on which module the process happened to import first."""
    def rank(item: tuple[int, tuple[str, Score]]) -> tuple[int, int, int]:
        position, (_, score) = item
        module = getattr(getattr(score, "_fit", None), "__module__", None)
        if module == __name__:
            return (0, 0, position)
        if module in SCORE_MODULES:
            return (1, SCORE_MODULES.index(module), position)
        return (2, 0, position)

    ordered = [entry for _, entry in sorted(enumerate(_REGISTRY.items()), key=rank)]
    _REGISTRY.clear()
    _REGISTRY.update(ordered)


def register_score(score: Score) -> Score:
    """Make ``score`` reachable by its name (configs, ``score="name"``); returns it.

    Raises
    ------
    ParameterError
        When ``score`` is not a :class:`Score` (:func:`check_score`) or its name is already registered.
    """
    check_score(score)
    if score.name in _REGISTRY and _REGISTRY[score.name] is not score:
        raise ParameterError(f"a score named {score.name!r} is already registered")
    _REGISTRY[score.name] = score
    return score


def registered_scores() -> dict[str, Score]:
    """Every registered score by name (built-ins first)."""
    return dict(_load())


class _Summaries(Mapping):
    """``SCORES``: name -> one-line summary of every registered score (read afresh on each use)."""

    def _fresh(self) -> dict[str, str]:
        return {name: getattr(score, "summary", "") or name for name, score in _load().items()}

    def __getitem__(self, key: str) -> str:
        return self._fresh()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fresh())

    def __len__(self) -> int:
        return len(self._fresh())


SCORES: Mapping[str, str] = _Summaries()


def get_score(name: str) -> Score:
    """The registered score ``name`` (a ParameterError naming the valid ones otherwise)."""
    registry = _load()
    if not isinstance(name, str) or name not in registry:
        raise ParameterError(f"score must be one of {', '.join(registry)}, got score={name!r}"
                             f"{suggestion(name, registry) if isinstance(name, str) else ''}")
    return registry[name]


#: The score spec of an audit that names none: every registered score, each where it applies (a portfolio).
AUTO = "auto"


def resolve_scores(spec: str | Score | Sequence[str | Score]) -> tuple[Score, ...]:
    """Score objects from a name, an object, or a list of either (distinct names, at least one).

    ``"auto"`` is every registered score (a portfolio; those that do not apply to a pair are skipped).
    """
    if isinstance(spec, str) and spec == AUTO:
        return tuple(_load().values())
    items = list(spec) if isinstance(spec, (list, tuple)) else [spec]
    if not items:
        raise ParameterError("score must name at least one score, got score=[]")
    scores = []
    for item in items:
        if isinstance(item, str):
            scores.append(get_score(item))
        elif isinstance(item, Score):
            scores.append(check_score(item))
        else:
            raise ParameterError(f"score must be a name, an object with name and fit(), or a list of them, "
                                 f"got score={item!r}")
    names = [score.name for score in scores]
    if len(set(names)) != len(names):
        raise ParameterError(f"score names must be distinct, got score={names}")
    return tuple(scores)


def is_fitted(name: str | Score) -> bool:
    """Deprecated name of :func:`score_needs_calibration`."""
    warnings.warn("is_fitted is now score_needs_calibration", DeprecationWarning, stacklevel=2)
    return score_needs_calibration(get_score(name) if isinstance(name, str) else name)


def fit_score(name: str | Score, pair: CanaryPair, calibration_a: np.ndarray | None = None,
              calibration_b: np.ndarray | None = None, *, seed: int = 0) -> ScoreFunction:
    """Fit the score ``name`` (or a score object) on calibration outputs and return it.

    Parameters
    ----------
    name : str or Score
        A registered name (``SCORES``) or a score object.
    pair : CanaryPair
        The neighbouring pair (direction, datasets, mechanism).
    calibration_a, calibration_b : numpy.ndarray, optional
        Outputs of calibration trials on ``S`` and ``S'``; required by the
        fitted scores, never the trials that certify the bound.
    """
    score = get_score(name) if isinstance(name, str) else name
    return score.fit(pair, calibration_a, calibration_b, seed)


def fit_classifier(cal_a: np.ndarray, cal_b: np.ndarray, *, hidden: int, seed: int) -> ScoreFunction:
    """Logistic regression (``hidden=0``) or a one-hidden-layer network fitted on calibration outputs.

    See :func:`dpaudit.attacks.classifiers.fit_logistic` and :func:`~dpaudit.attacks.classifiers.fit_mlp`.
    """
    if hidden:
        return fit_mlp(cal_a, cal_b, hidden=hidden, seed=seed)
    return fit_logistic(cal_a, cal_b, seed=seed)


def _fit_gaussian(cal_a: np.ndarray, cal_b: np.ndarray) -> ScoreFunction:
    """``log N(x; m_b, C_b) - log N(x; m_a, C_a)`` with a small ridge on the covariances."""
    def moments(x):
        mean = x.mean(axis=0)
        cov = np.atleast_2d(np.cov(x, rowvar=False))
        ridge = 1e-9 * max(float(np.trace(cov)) / cov.shape[0], 1e-300)
        cov = cov + ridge * np.eye(cov.shape[0])
        precision = np.linalg.inv(cov)
        _, logdet = np.linalg.slogdet(cov)
        return mean, precision, logdet

    mean_a, prec_a, logdet_a = moments(cal_a)
    mean_b, prec_b, logdet_b = moments(cal_b)

    def score(outputs: np.ndarray) -> np.ndarray:
        x = np.asarray(outputs, dtype=float)
        da, db = x - mean_a, x - mean_b
        quad_a = np.einsum("ij,jk,ik->i", da, prec_a, da)
        quad_b = np.einsum("ij,jk,ik->i", db, prec_b, db)
        return 0.5 * (quad_a - quad_b) + 0.5 * (logdet_a - logdet_b)
    return score


