"""A score for few-valued and mixed outputs: outcome counts, or a classifier on encoded coordinates.

Many private algorithms release booleans, indices, counts or sentinel codes
(``-1`` for "aborted", ``-1000`` for "below the threshold"), sometimes next to
noisy values (docs/theory.md 7). The ``discrete`` score reads them as such,
deciding everything on the calibration trials it is fitted on:

- a coordinate with at most :data:`MAX_LEVELS` distinct values is a
  category: one 0/1 column per value seen (an unseen value sets none);
- a coordinate with more values, some of which repeat exactly in at least
  :data:`ATOM_SHARE` of the trials (sentinel codes), gets one 0/1 column per
  such value and keeps its other values as they are, set to 0 where a
  sentinel is flagged;
- any other coordinate is continuous and kept as it is.

When the whole output takes few distinct values (every coordinate is a
category and each outcome seen is seen :data:`MIN_PER_OUTCOME` times on
average), each outcome ``o`` is scored by the smoothed log-ratio of its
calibration frequencies, ``log((n_b(o) + a) / N_b) - log((n_a(o) + a) / N_a)``
with ``a`` = :data:`PSEUDO_COUNT` (an outcome never seen scores 0): the plug-in
likelihood ratio, whose superlevel sets, with a randomised tie-break at the
threshold (``audit.thresholds``), are the Neyman-Pearson tests. Otherwise a
logistic regression (``attacks.scores``) is fitted on the encoded columns.

Values are compared for exact equality only where they repeat exactly on the
calibration trials (a category or a sentinel); continuous values are never
binned, so the score reads nothing finer than what the mechanism releases.
Outcomes are looked up by one integer code per row (mixed radix over the
coordinates' categories, or a 64-bit hash when the radix would overflow; a
hash collision merges two outcomes, which can cost power, never soundness:
the score is fitted on calibration trials only).

References
----------
docs/theory.md 7 (few-valued and mixed outputs); Neyman-Pearson lemma;
Ding, Wang, Wang, Zhang, Kifer, "Detecting violations of differential
privacy", CCS 2018 (histogram tests on discrete outputs).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from dpaudit.mechanisms.errors import ParameterError

__all__ = ["ATOM_SHARE", "Encoding", "MAX_LEVELS", "MIN_PER_OUTCOME", "PSEUDO_COUNT", "fit_discrete",
           "fit_encoding", "outcome_codes"]

MAX_LEVELS = 32  #: a coordinate with at most this many distinct calibration values is a category
ATOM_SHARE = 0.01  #: a repeated value of a continuous coordinate with at least this share is a sentinel
MAX_SENTINELS = 8  #: sentinels flagged per coordinate (the most frequent)
MIN_PER_OUTCOME = 200.0  #: the outcome table is used when outcomes are seen this often on average
PSEUDO_COUNT = 0.5  #: the smoothing ``a`` of the outcome log-ratio
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
        frequent = frequent[np.argsort(-counts[frequent], kind="stable")][:MAX_SENTINELS]
        sentinels.append(np.sort(values[frequent]))
    return Encoding(tuple(levels), tuple(sentinels))


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


def _fit_histogram(encoding: Encoding, cal_a: np.ndarray, cal_b: np.ndarray):
    codes_a, codes_b = outcome_codes(encoding, cal_a), outcome_codes(encoding, cal_b)
    keys, inverse = np.unique(np.concatenate([codes_a, codes_b]), return_inverse=True)
    count_a = np.bincount(inverse[:codes_a.size], minlength=keys.size)
    count_b = np.bincount(inverse[codes_a.size:], minlength=keys.size)
    log_ratio = (np.log(count_b + PSEUDO_COUNT) - np.log(codes_b.size)
                 - np.log(count_a + PSEUDO_COUNT) + np.log(codes_a.size))

    def histogram(outputs: np.ndarray) -> np.ndarray:
        codes = outcome_codes(encoding, outputs)
        position = np.minimum(np.searchsorted(keys, codes), keys.size - 1)
        return np.where(keys[position] == codes, log_ratio[position], 0.0)

    histogram.outcomes = int(keys.size)
    # every score is a function of the outcome, and this table estimates the best one (the likelihood
    # ratio): a portfolio takes it without a contest (``audit.portfolio``)
    histogram.sufficient = True
    return histogram


def fit_discrete(cal_a: np.ndarray, cal_b: np.ndarray, *, seed: int):
    """The ``discrete`` score fitted on calibration outputs of ``S`` and ``S'`` (module docstring).

    Raises
    ------
    ParameterError
        When no coordinate takes few values or holds a sentinel (the plain classifiers apply).
    """
    from dpaudit.attacks.classifiers import fit_logistic

    cal_a, cal_b = _canonical(cal_a), _canonical(cal_b)
    encoding = fit_encoding(np.concatenate([cal_a, cal_b]))
    if not encoding.discrete:
        raise ParameterError("score 'discrete' found no coordinate with few distinct values or a repeated "
                             "sentinel on the calibration trials; use 'logistic' or 'gaussian'")
    if encoding.categorical:
        histogram = _fit_histogram(encoding, cal_a, cal_b)
        if (cal_a.shape[0] + cal_b.shape[0]) >= MIN_PER_OUTCOME * histogram.outcomes:
            return histogram
    classifier = fit_logistic(encoding.features(cal_a), encoding.features(cal_b), seed=seed)
    return lambda outputs: classifier(encoding.features(_canonical(outputs)))


def _register() -> None:
    """Register ``discrete`` (imported by ``attacks.scores`` on the registry's first use)."""
    from dpaudit.attacks.scores import BuiltinScore, register_score

    register_score(BuiltinScore(
        "discrete", "few-valued and mixed outputs: outcome log-ratio of calibration counts, or a classifier "
        "on one-hot categories and sentinel flags", True,
        lambda pair, a, b, seed: fit_discrete(a, b, seed=seed)))


_register()
