"""A score for few-valued and mixed outputs: outcome counts, or a classifier on encoded coordinates.

Many private algorithms release booleans, indices, counts or sentinel codes
(``-1`` for "aborted", ``-1000`` for "below the threshold"), sometimes next to
noisy values (docs/theory.md 7). The ``discrete`` score reads them as such,
deciding everything on the calibration trials it is fitted on:

- a coordinate with at most :data:`MAX_LEVELS` distinct values is a
  category: one 0/1 column per value seen (an unseen value sets none);
- a coordinate with more values, some of which repeat exactly in at least
  :data:`ATOM_SHARE` of the trials and :data:`ATOM_RATIO` times as often as
  some value next to them (sentinel codes: an atom, not the mode of a
  continuous law released on a grid), gets one 0/1 column per such value and
  keeps its other values as they are, set to 0 where a sentinel is flagged;
- any other coordinate is continuous and kept as it is.

When every coordinate is a category, each outcome ``o`` is scored by its
log-ratio estimated two ways and combined: the smoothed log-ratio of its
calibration frequencies, ``log((n_b(o) + a) / N_b) - log((n_a(o) + a) / N_a)``
with ``a`` = :data:`PSEUDO_COUNT`, shrunk towards a logistic regression on the
one-hot columns by the empirical-Bayes weight of its counts
(:func:`_fit_outcome_table`): the plug-in likelihood ratio, whose superlevel
sets, with a randomised tie-break at the threshold (``audit.thresholds``),
are the Neyman-Pearson tests. Where the output has one coordinate per
record, the regression gives a value one effect in all the coordinates
whose records the pair moves alike (it counts each value in each such
group, ``attacks.value_counts``) unless Akaike's
criterion prefers one effect per coordinate and value: at epsilon 0.1 the
per-coordinate effects of an SVT's ten answers are each about as large as
their noise, while the numbers of "below" answers in each group order its
outcomes as their likelihood ratio does. Otherwise a logistic regression
(``attacks.classifiers``) is fitted on the encoded columns, reading each
value linearly; where the pair groups the coordinates, each group's
sentinel codes are counted and its values summed (one slope per group)
unless Akaike's criterion prefers one effect per coordinate, as for the
categories (``count_mixed``; the pair screen keeps one per coordinate).
Where every coordinate is a category or holds sentinels, a second reading
competes on the calibration log-likelihood: each value cut at
its coordinate's calibration median (:func:`coarsen`), which makes the output
categorical and scores it by the outcome table. A value whose log-ratio is a
step (fresh Laplace noise on an answer that moves by much less than its
scale, as in numerical SVT) is read best by the cut, one whose log-ratio
grows in the tails (Gaussian noise) by the line; the cut is taken only when
its likelihood beats the line's by :data:`SPLIT_MARGIN` nats.

Its test is placed hedged (:data:`TAIL_MODEL`, ``audit.statistics.hedged``): the
test the calibration counts place, the best one in a thin tail and the one
the exponential tilt of the scores places are certified together, each at its
share of the failure probability, since at small epsilon which of them is
best is a question the calibration trials answer poorly and the
certification trials well.

Values are compared for exact equality only where they repeat exactly on the
calibration trials (a category or a sentinel); continuous values are read
linearly or by their side of one cut, never binned finer, so the score reads
nothing finer than what the mechanism releases.
Outcomes are looked up by one integer code per row (mixed radix over the
coordinates' categories, or a 64-bit hash when the radix would overflow; a
hash collision merges two outcomes, which can cost power, never soundness:
the score is fitted on calibration trials only).

References
----------
docs/theory.md 7 (few-valued and mixed outputs); Neyman-Pearson lemma;
Ding, Wang, Wang, Zhang, Kifer, "Detecting violations of differential
privacy", CCS 2018 (histogram tests on discrete outputs);
DerSimonian, R. and Laird, N. (1986), "Meta-analysis in clinical trials",
Controlled Clinical Trials 7 (the moment estimate of the between-outcome variance);
Akaike, H. (1974), "A new look at the statistical model identification",
IEEE Transactions on Automatic Control 19 (the choice between the two regressions).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

from dpaudit.attacks.classifiers import fit_logistic, fit_logistic_counted
from dpaudit.attacks.scores import BuiltinScore, register_score
from dpaudit.attacks.shrinkage import shrink
from dpaudit.attacks.value_counts import Counted, log_likelihood, pool_values, record_groups
from dpaudit.core.errors import ParameterError

if TYPE_CHECKING:
    from dpaudit.attacks.score_protocol import ScoreFunction

__all__ = ["ATOM_NEIGHBOURS", "ATOM_RATIO", "ATOM_SHARE", "CALIBRATION_SHARE", "Encoding", "MAX_LEVELS", "PSEUDO_COUNT", "SPLIT_MARGIN", "TAIL_MODEL", "coarsen",
           "fit_discrete", "fit_encoding", "median_cuts", "outcome_codes"]

MAX_LEVELS = 32  #: a coordinate with at most this many distinct calibration values is a category
ATOM_SHARE = 0.01  #: a repeated value of a continuous coordinate with at least this share is a sentinel
MAX_SENTINELS = 8  #: sentinels flagged per coordinate (the most frequent)
#: A sentinel repeats at least this many times as often as the least frequent of its :data:`ATOM_NEIGHBOURS`
#: nearest distinct values on each side: a continuous law released on a grid (model parameters rounded to
#: 2^-12) has counts that change smoothly from one grid value to the next, so its mode is no sentinel (the
#: least of 8 Poisson counts of mean 15 is about 9), while a code such as -1000 beside noisy answers repeats
#: where some neighbour occurs once (the least, not the mean: codes sit side by side, -2000 next to -1000)
ATOM_RATIO = 4.0
ATOM_NEIGHBOURS = 4
PSEUDO_COUNT = 0.5  #: the smoothing ``a`` of the outcome log-ratio
#: Values are read cut at their median only when that reading's calibration log-likelihood beats the linear
#: one's by this many nats: both fit as many parameters, and the line is kept unless the data clearly say
#: otherwise (a Gaussian value cut at its median loses the tails, where its log-ratio grows)
SPLIT_MARGIN = 2.0
#: How the score's test is placed: the calibration counts' test, the best in a thin tail and the exponential
#: tilt's, certified together under a union bound (``audit.statistics.hedged``, docs/theory.md 7)
TAIL_MODEL = "hedged"
#: The share of the trials this score asks the runner to calibrate on (``audit.jobs.runner``; at least the
#: ``calibration_fraction`` setting): it fits one effect per coordinate and category, each about as large as its
#: noise at epsilon 0.1, and places its test on the same trials (docs/theory.md 7 gives the figures)
CALIBRATION_SHARE = 0.3
_HASH = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9, 0x27D4EB2F165667C5],
                 dtype=np.uint64)


@dataclasses.dataclass(frozen=True, slots=True)
class Encoding:
    """How each coordinate is read, fixed on calibration trials.

    ``levels[j]`` are the sorted category values of a categorical coordinate
    ``j`` (None otherwise); ``sentinels[j]`` the flagged values of a mixed
    coordinate (empty otherwise).
    """

    levels: tuple[np.ndarray | None, ...]
    sentinels: tuple[np.ndarray, ...]

    @property
    def categorical(self) -> bool:
        """Every coordinate is a category (the output takes few distinct values)."""
        return all(level is not None for level in self.levels)

    @property
    def discrete(self) -> bool:
        """Some coordinate is a category or holds a sentinel."""
        return any(level is not None for level in self.levels) or any(s.size for s in self.sentinels)

    def features(self, outputs: np.ndarray) -> np.ndarray:
        """The encoded columns of ``outputs`` (one row per trial), no loop over trials."""
        x = np.asarray(outputs, dtype=float)
        columns = []
        for j, (level, sentinel) in enumerate(zip(self.levels, self.sentinels)):
            value = x[:, j]
            if level is not None:
                columns.append(value[:, None] == level[None, :])
            elif sentinel.size:
                flags = value[:, None] == sentinel[None, :]
                columns.append(flags)
                columns.append(np.where(flags.any(axis=1), 0.0, value)[:, None])
            else:
                columns.append(value[:, None])
        return np.concatenate([np.asarray(c, dtype=float) for c in columns], axis=1)


def _canonical(outputs) -> np.ndarray:
    x = np.asarray(outputs, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    return x + 0.0  # -0.0 and 0.0 are one value


def fit_encoding(calibration: np.ndarray) -> Encoding:
    """Read each coordinate of the (pooled) calibration outputs as a category, mixed or continuous."""
    x = _canonical(calibration)
    levels: list[np.ndarray | None] = []
    sentinels: list[np.ndarray] = []
    for j in range(x.shape[1]):
        values, counts = np.unique(x[:, j], return_counts=True)
        if values.size <= MAX_LEVELS:
            levels.append(values)
            sentinels.append(np.empty(0))
            continue
        levels.append(None)
        frequent = np.flatnonzero(counts >= max(ATOM_SHARE * x.shape[0], 2))
        frequent = frequent[[_is_atom(counts, i) for i in frequent]] if frequent.size else frequent
        frequent = frequent[np.argsort(-counts[frequent], kind="stable")][:MAX_SENTINELS]
        sentinels.append(np.sort(values[frequent]))
    return Encoding(tuple(levels), tuple(sentinels))


def _is_atom(counts: np.ndarray, i: int) -> bool:
    """Whether the value of rank ``i`` repeats :data:`ATOM_RATIO` times as often as the least frequent of its
    neighbours by rank."""
    neighbours = np.concatenate([counts[max(i - ATOM_NEIGHBOURS, 0):i], counts[i + 1:i + 1 + ATOM_NEIGHBOURS]])
    return bool(counts[i] >= ATOM_RATIO * neighbours.min()) if neighbours.size else True


def outcome_codes(encoding: Encoding, outputs: np.ndarray) -> np.ndarray:
    """One integer per row of a categorical output: equal rows, equal codes (unseen values share a code)."""
    x = _canonical(outputs)
    radix = [level.size + 1 for level in encoding.levels]  # the last digit: a value not seen on calibration
    digits = []
    for j, level in enumerate(encoding.levels):
        position = np.searchsorted(level, x[:, j])
        inside = position < level.size
        seen = inside & (level[np.minimum(position, level.size - 1)] == x[:, j])
        digits.append(np.where(seen, position, level.size).astype(np.uint64))
    if float(np.prod(np.asarray(radix, dtype=float))) < 2.0 ** 62:
        code = np.zeros(x.shape[0], dtype=np.uint64)
        for digit, base in zip(digits, radix):
            code = code * np.uint64(base) + digit
        return code
    code = np.zeros(x.shape[0], dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j, digit in enumerate(digits):  # 64-bit polynomial hash (wraps around)
            code = (code ^ (digit + np.uint64(j + 1))) * _HASH[j % _HASH.size]
    return code


def median_cuts(encoding: Encoding, calibration: np.ndarray) -> tuple[float | None, ...]:
    """The median of each non-categorical coordinate's values other than its sentinels (None for a category)."""
    x = _canonical(calibration)
    cuts: list[float | None] = []
    for j, (level, sentinel) in enumerate(zip(encoding.levels, encoding.sentinels)):
        if level is not None:
            cuts.append(None)
            continue
        rest = x[:, j][~np.isin(x[:, j], sentinel)]
        cuts.append(float(np.median(rest)) if rest.size else 0.0)
    return tuple(cuts)


def coarsen(encoding: Encoding, cuts: tuple[float | None, ...], outputs: np.ndarray) -> np.ndarray:
    """``outputs`` with each non-categorical value replaced by a category: the index of its sentinel, else
    ``S`` at or below its cut and ``S + 1`` above (``S`` sentinels); categories are kept."""
    x = _canonical(outputs).copy()
    for j, (sentinel, cut) in enumerate(zip(encoding.sentinels, cuts)):
        if cut is None:
            continue
        value = x[:, j]
        flags = value[:, None] == sentinel[None, :]
        side = np.where(value > cut, sentinel.size + 1, sentinel.size)
        x[:, j] = np.where(flags.any(axis=1), np.argmax(flags, axis=1), side)
    return x


def _outcomes(encoding: Encoding, cal_a: np.ndarray, cal_b: np.ndarray) -> tuple[np.ndarray, Counted]:
    """The distinct outcomes seen (their codes, sorted), one one-hot row each, and how many calibration trials
    of each side hold each (:class:`~dpaudit.attacks.value_counts.Counted`)."""
    codes_a, codes_b = outcome_codes(encoding, cal_a), outcome_codes(encoding, cal_b)
    keys, first, inverse = np.unique(np.concatenate([codes_a, codes_b]), return_index=True, return_inverse=True)
    distinct = encoding.features(np.concatenate([cal_a, cal_b])[first])  # one row per outcome seen
    count_a = np.bincount(inverse[:codes_a.size], minlength=keys.size)
    count_b = np.bincount(inverse[codes_a.size:], minlength=keys.size)
    return keys, Counted(distinct, count_a, count_b)


def _fit_outcome_table(encoding: Encoding, cal_a: np.ndarray, cal_b: np.ndarray, *, seed: int,
                       classifier: ScoreFunction | None = None, groups: np.ndarray | None = None,
                       outcomes: tuple[np.ndarray, Counted] | None = None):
    """The outcome log-ratio, each outcome's table entry shrunk towards a classifier on the categories.

    A logistic regression on the one-hot columns gives every outcome a log-ratio
    ``m(o)`` (its logit less the log of the sides' sizes), which adds the
    coordinates' effects and so also scores outcomes seen rarely or never. The
    table's smoothed log-ratio ``r(o)`` (module docstring), of sampling variance
    about ``v(o) = 1 / (n_a(o) + a) + 1 / (n_b(o) + a)``, departs from it by
    what the coordinates' sum misses (their interactions) plus noise. Each
    outcome scores ``m(o) + tau^2 / (tau^2 + v(o)) (r(o) - m(o))``, with the
    interactions' variance ``tau^2`` estimated from the residuals
    (``attacks.shrinkage``): the empirical-Bayes mean of the
    outcome's log-ratio. An outcome seen often keeps its own table entry, one
    seen rarely the classifier's, and as the budget grows the table takes
    over, so the score tends to the likelihood ratio (docs/theory.md 7). The
    regression is the one on the value counts where ``attacks.value_counts``
    prefers it (the score's ``model`` says which). Every regression is fitted
    on the distinct outcomes with their counts (``fit_logistic_counted``), not
    on the trials written out. ``outcomes`` is :func:`_outcomes`'s answer
    where the caller has it.
    """
    keys, counted = outcomes if outcomes is not None else _outcomes(encoding, cal_a, cal_b)
    if classifier is None:  # the logistic regression on the one-hot columns (given when already fitted)
        classifier = fit_logistic_counted(*counted, seed=seed)
    prior = float(np.log(cal_b.shape[0]) - np.log(cal_a.shape[0]))  # logit = log-ratio + log(N_b / N_a)
    model = "coordinates"
    if groups is not None:
        classifier, model = pool_values(encoding, counted, counted.rows, classifier, groups, seed=seed)
    count_a, count_b = counted.count_a, counted.count_b
    table = (np.log(count_b + PSEUDO_COUNT) - np.log(cal_b.shape[0])
             - np.log(count_a + PSEUDO_COUNT) + np.log(cal_a.shape[0]))
    modelled = classifier(counted.rows) - prior
    variance = 1.0 / (count_a + PSEUDO_COUNT) + 1.0 / (count_b + PSEUDO_COUNT)
    shrunk, tau2 = shrink(table, variance, modelled)
    correction = shrunk - modelled

    def outcome_table(outputs: np.ndarray) -> np.ndarray:
        x = _canonical(outputs)
        codes = outcome_codes(encoding, x)
        position = np.minimum(np.searchsorted(keys, codes), keys.size - 1)
        seen = keys[position] == codes
        return classifier(encoding.features(x)) - prior + np.where(seen, correction[position], 0.0)

    outcome_table.outcomes = int(keys.size)
    outcome_table.interaction_variance = tau2
    outcome_table.model = model
    # every score is a function of the outcome, and this table estimates the best one (the likelihood
    # ratio): a portfolio takes it without a contest (``audit.portfolio``)
    outcome_table.preferred = True
    outcome_table.values = "categories"
    outcome_table.tail_model = TAIL_MODEL
    outcome_table.calibration_share = CALIBRATION_SHARE
    return outcome_table


def fit_discrete(cal_a: np.ndarray, cal_b: np.ndarray, *, seed: int, groups: np.ndarray | None = None,
                 count_mixed: bool = True):
    """The ``discrete`` score fitted on calibration outputs of ``S`` and ``S'`` (module docstring).

    ``groups`` labels the coordinates whose values may share one effect (``attacks.value_counts.record_groups``); None
    gives every coordinate its own. ``count_mixed=False`` keeps one effect per coordinate where the output
    mixes sentinels with released values (the pair screen's reading, ``audit.checks.vector_pairs``).

    Raises
    ------
    ParameterError
        When no coordinate takes few values or holds a sentinel (the plain classifiers apply), or
        ``groups`` does not label each coordinate once.
    """
    cal_a, cal_b = _canonical(cal_a), _canonical(cal_b)
    if groups is not None and np.shape(groups) != (cal_a.shape[1],):
        raise ParameterError(f"groups must label each of the {cal_a.shape[1]} coordinates, "
                             f"got groups of shape {np.shape(groups)}")
    encoding = fit_encoding(np.concatenate([cal_a, cal_b]))
    if not encoding.discrete:
        raise ParameterError("score 'discrete' found no coordinate with few distinct values or a repeated "
                             "sentinel on the calibration trials; use 'logistic' or 'gaussian'")
    if encoding.categorical:
        return _fit_outcome_table(encoding, cal_a, cal_b, seed=seed, groups=groups)
    features_a, features_b = encoding.features(cal_a), encoding.features(cal_b)
    classifier = fit_logistic(features_a, features_b, seed=seed)
    # every coordinate a category or holding sentinel codes: the other scores read the codes (-1000 beside
    # answers of +-20) as magnitudes, and a contest on 2% of the calibration trials picks among them by
    # luck (docs/theory.md 7): a portfolio takes this one without a contest
    preferred = all(level is not None or sentinel.size for level, sentinel in zip(encoding.levels, encoding.sentinels))
    linear = log_likelihood(classifier, features_a, features_b) if preferred else None  # else computed if needed
    if preferred:
        split = _fit_split(encoding, cal_a, cal_b, linear, seed=seed)
        if split is not None:
            return split
    model = "coordinates"
    if count_mixed and groups is not None:  # each group's sentinels counted and values summed, if Akaike agrees
        classifier, model = pool_values(encoding, (features_a, features_b), np.concatenate([features_a, features_b]),
                                        classifier, groups, seed=seed, likelihood=linear)

    def encoded(outputs: np.ndarray) -> np.ndarray:
        return classifier(encoding.features(_canonical(outputs)))
    encoded.preferred = preferred
    encoded.model = model
    encoded.values = "linear"
    encoded.tail_model = TAIL_MODEL
    encoded.calibration_share = CALIBRATION_SHARE
    return encoded


def _fit_split(encoding: Encoding, cal_a: np.ndarray, cal_b: np.ndarray, linear: float, *, seed: int):
    """The outcome table of the output with its values cut at their medians (:func:`coarsen`), or None when
    the additive model of that reading does not beat the linear one's log-likelihood ``linear`` by
    :data:`SPLIT_MARGIN` nats."""
    cuts = median_cuts(encoding, np.concatenate([cal_a, cal_b]))
    coarse_a, coarse_b = coarsen(encoding, cuts, cal_a), coarsen(encoding, cuts, cal_b)
    coarse = fit_encoding(np.concatenate([coarse_a, coarse_b]))  # every coordinate a category now
    outcomes = _outcomes(coarse, coarse_a, coarse_b)
    classifier = fit_logistic_counted(*outcomes[1], seed=seed)
    if log_likelihood(classifier, outcomes[1]) < linear + SPLIT_MARGIN:
        return None
    table = _fit_outcome_table(coarse, coarse_a, coarse_b, seed=seed, classifier=classifier, outcomes=outcomes)

    def split(outputs: np.ndarray) -> np.ndarray:
        return table(coarsen(encoding, cuts, outputs))
    split.outcomes, split.interaction_variance = table.outcomes, table.interaction_variance
    split.preferred = True
    split.values = "median split"
    split.tail_model = TAIL_MODEL
    split.calibration_share = CALIBRATION_SHARE
    split.cuts = cuts
    return split


def _register() -> None:
    """Register ``discrete`` (imported by ``attacks.scores`` on the registry's first use)."""
    register_score(BuiltinScore(
        "discrete", "few-valued and mixed outputs: outcome log-ratio of calibration counts, or a classifier "
        "on one-hot categories and sentinel flags", True,
        lambda pair, a, b, seed: fit_discrete(a, b, seed=seed, groups=record_groups(pair, _canonical(a).shape[1]))))


_register()
