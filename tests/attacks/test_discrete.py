"""The ``discrete`` score: encoding of few-valued and mixed coordinates, outcome codes, the outcome table."""

from __future__ import annotations

import numpy as np
import pytest

from dpaudit.attacks import discrete, value_counts
from dpaudit.attacks.discrete import fit_discrete, fit_encoding, outcome_codes
from dpaudit.attacks.scores import registered_scores, resolve_scores
from dpaudit.core.errors import ParameterError


def _mixed(rng: np.random.Generator, size: int) -> np.ndarray:
    """A boolean, a count in 0..4, a sentinel -1000 or a noisy value, a continuous value."""
    flag = rng.random(size) < 0.3
    value = np.where(rng.random(size) < 0.4, -1000.0, rng.normal(5.0, 1.0, size))
    return np.column_stack([flag, rng.integers(0, 5, size), value, rng.normal(size=size)])


def test_encoding_reads_categories_sentinels_and_continuous_coordinates():
    rng = np.random.default_rng(0)
    outputs = _mixed(rng, 2_000)
    encoding = fit_encoding(outputs)
    assert encoding.levels[0].tolist() == [0.0, 1.0] and encoding.levels[1].tolist() == [0, 1, 2, 3, 4]
    assert encoding.levels[2] is None and encoding.sentinels[2].tolist() == [-1000.0]
    assert encoding.levels[3] is None and encoding.sentinels[3].size == 0  # continuous: never binned
    features = encoding.features(outputs)
    # 2 + 5 one-hot columns, a sentinel flag and the value (0 where flagged), the continuous value
    assert features.shape == (2_000, 10)
    flagged = outputs[:, 2] == -1000.0
    assert np.array_equal(features[:, 7], flagged.astype(float))
    assert np.all(features[flagged, 8] == 0.0) and np.array_equal(features[~flagged, 8], outputs[~flagged, 2])
    assert np.array_equal(features[:, 9], outputs[:, 3])
    # a category value never seen on calibration sets no column
    unseen = outputs[:1].copy()
    unseen[0, 1] = 7.0
    assert encoding.features(unseen)[0, 2:7].sum() == 0.0


def test_outcome_codes_are_equal_exactly_for_equal_rows_in_both_radix_and_hash_forms():
    rng = np.random.default_rng(1)
    for columns in (3, 60):  # 3^60 outcomes overflow 64 bits: the hashed codes
        rows = rng.integers(0, 2, size=(3_000, columns)).astype(float)
        encoding = fit_encoding(rows)
        codes = outcome_codes(encoding, rows)
        distinct_rows = np.unique(rows, axis=0, return_inverse=True)[1].ravel()
        distinct_codes = np.unique(codes, return_inverse=True)[1].ravel()
        pairs = set(zip(distinct_rows.tolist(), distinct_codes.tolist()))  # the same partition of the trials
        assert len(pairs) == len(set(distinct_rows.tolist())) == len(set(distinct_codes.tolist()))
    # -0.0 and 0.0 are one value
    encoding = fit_encoding(np.array([[0.0], [1.0]]))
    assert outcome_codes(encoding, np.array([[-0.0]]))[0] == outcome_codes(encoding, np.array([[0.0]]))[0]


def test_a_saturated_classifier_gives_each_outcome_its_empirical_log_ratio():
    # one categorical coordinate: the classifier on its one-hot columns fits every outcome's log-ratio,
    # so the score is the empirical log(n_b / N_b) - log(n_a / N_a) up to the table's pseudo-count
    rng = np.random.default_rng(2)
    cal_a = rng.choice(3, size=(4_000, 1), p=[0.5, 0.3, 0.2]).astype(float)
    cal_b = rng.choice(3, size=(4_000, 1), p=[0.3, 0.3, 0.4]).astype(float)
    score = fit_discrete(cal_a, cal_b, seed=0)
    a = discrete.PSEUDO_COUNT
    for outcome in range(3):
        n_a, n_b = int(np.sum(cal_a == outcome)), int(np.sum(cal_b == outcome))
        empirical = np.log(n_b / 4_000) - np.log(n_a / 4_000)
        # the pseudo-count moves a log-ratio by at most a / n_a + a / n_b
        assert abs(score(np.array([[float(outcome)]]))[0] - empirical) <= a / n_a + a / n_b + 1e-6
    assert score(np.array([[5.0]]))[0] == pytest.approx(0.0, abs=0.05)  # unseen: the intercept only


def test_additive_effects_are_read_from_the_classifier_and_unseen_outcomes_scored():
    # independent bits (no interaction): the table's departures are noise, tau^2 ~ 0, and an outcome never
    # seen on calibration (all 12 bits set) gets the bits' summed effect rather than 0
    rng = np.random.default_rng(3)
    cal_a = (rng.random((2_000, 12)) < 0.4).astype(float)
    cal_b = (rng.random((2_000, 12)) < 0.6).astype(float)
    score = fit_discrete(cal_a, cal_b, seed=0)
    assert score.outcomes > 1_000 and score.interaction_variance < 0.05
    # each set bit adds log(0.6 / 0.4) - log(0.4 / 0.6) = 0.81 to the true log-ratio: 12 bits, 9.7
    assert score(np.ones((1, 12)))[0] - score(np.zeros((1, 12)))[0] == pytest.approx(12 * 2 * np.log(1.5), rel=0.25)


def test_interactions_the_classifier_misses_are_taken_from_the_table():
    # S' makes the two bits equal more often; each bit alone is a fair coin on both sides, so the
    # classifier's additive effects are ~0 and only the outcome table sees the difference
    rng = np.random.default_rng(5)

    def draw(p_equal: float, size: int) -> np.ndarray:
        first = rng.integers(0, 2, size)
        second = np.where(rng.random(size) < p_equal, first, 1 - first)
        return np.column_stack([first, second]).astype(float)
    cal_a, cal_b = draw(0.5, 20_000), draw(0.7, 20_000)
    score = fit_discrete(cal_a, cal_b, seed=0)
    assert score.interaction_variance > 0.05
    equal, unequal = score(np.array([[0.0, 0.0], [1.0, 1.0]])), score(np.array([[0.0, 1.0], [1.0, 0.0]]))
    # true log-ratios: log(0.7 / 0.5) = 0.34 and log(0.3 / 0.5) = -0.51; binomial error about 0.03 each
    assert np.all(np.abs(equal - np.log(1.4)) < 0.1) and np.all(np.abs(unequal - np.log(0.6)) < 0.1)


def test_a_value_that_moves_alike_in_a_group_gets_one_effect_and_one_that_does_not_its_own():
    # six coordinates where S' sets each bit a little more often: the per-coordinate regression fits six
    # effects of noise about their size, the value counts one. Akaike's criterion: 5 parameters saved, and
    # the per-coordinate fit's gain is chi^2_5 / 2 here (2.5 nats on average, above 5 in 7.5% of draws)
    rng = np.random.default_rng(8)
    cal_a = (rng.random((20_000, 6)) < 0.50).astype(float)
    cal_b = (rng.random((20_000, 6)) < 0.52).astype(float)
    one_group = np.zeros(6, dtype=int)
    alike = fit_discrete(cal_a, cal_b, seed=0, groups=one_group)
    assert alike.model == "value counts"
    assert alike(np.ones((1, 6)))[0] - alike(np.zeros((1, 6)))[0] == pytest.approx(
        6 * (np.log(0.52 / 0.5) - np.log(0.48 / 0.5)), rel=0.3)  # the pooled effect: 0.08 +- 0.02 per bit
    assert fit_discrete(cal_a, cal_b, seed=0).model == "coordinates"  # no groups: nothing is pooled
    # the first bit alone moves, by much more than its noise: each coordinate keeps its own effect
    cal_b[:, 0] = rng.random(20_000) < 0.6
    cal_b[:, 1:] = rng.random((20_000, 5)) < 0.5
    own = fit_discrete(cal_a, cal_b, seed=0, groups=one_group)
    assert own.model == "coordinates"
    assert own(np.array([[1.0, 0, 0, 0, 0, 0]]))[0] - own(np.zeros((1, 6)))[0] == pytest.approx(
        np.log(0.6 / 0.5) - np.log(0.4 / 0.5), abs=0.06)
    # grouped as the pair moved them (the first record alone): the other five share one effect again
    assert fit_discrete(cal_a, cal_b, seed=0, groups=np.array([1, 0, 0, 0, 0, 0])).model == "value counts"
    with pytest.raises(ParameterError, match="groups must label each of the 6 coordinates"):
        fit_discrete(cal_a, cal_b, seed=0, groups=np.zeros(5))
    assert value_counts.value_counts(fit_encoding(np.array([[0.0, 5.0], [1.0, 6.0]])), np.zeros(2)) is None


def test_value_counts_of_a_mixed_output_count_each_groups_sentinels_and_sum_its_values():
    # two mixed coordinates (sentinel -1000 or a value) in one group, a third alone: the counted columns are
    # the group's "-1000" count, its values' sum, and the third coordinate's flag and value as they were
    rng = np.random.default_rng(5)
    outputs = np.where(rng.random((2_000, 3)) < 0.4, -1000.0, rng.normal(5.0, 1.0, (2_000, 3)))
    encoding = fit_encoding(outputs)
    matrix = value_counts.value_counts(encoding, np.array([0, 0, 1]))
    counted = encoding.features(outputs) @ matrix
    flagged, released = outputs == -1000.0, np.where(outputs == -1000.0, 0.0, outputs)
    assert counted.shape == (2_000, 4)
    assert np.array_equal(counted[:, 0], flagged[:, :2].sum(axis=1))
    np.testing.assert_allclose(counted[:, 1], released[:, :2].sum(axis=1))
    assert np.array_equal(counted[:, 2], flagged[:, 2]) and np.array_equal(counted[:, 3], released[:, 2])
    assert value_counts.value_counts(encoding, np.array([0, 1, 2])) is None  # nothing shared: nothing to count


def test_svt3_released_answers_are_ordered_steadily_when_each_group_is_counted():
    # SVT3 (c = 1) at epsilon 0.1 on the X pair: an outcome is the first query above and its noisy answer
    # (or none). With one effect per coordinate the line fits ten slopes and twenty codes, each about as
    # large as its noise on 10^5 calibration trials per side; counted, each group of queries the pair moves
    # alike has one slope and one effect per code. Measured as the law's ceiling at 10^6 trials in the order
    # of the fitted score, against the law's own (seeds 2-5): 0.952, 0.851, 0.953, 0.952 counted, 0.846,
    # 0.540, 0.570, 0.825 per coordinate (docs/theory.md 7)
    from types import SimpleNamespace

    from dpaudit.auditing.checks.vector_pairs import pattern_pairs
    from dpaudit.auditing.checks.zoo import blackbox as bb
    from dpaudit.auditing.checks.zoo.blackbox_laws import grid_edges
    from dpaudit.auditing.checks.zoo.blackbox_suite import SUITE

    svt3 = next(algorithm for algorithm in SUITE if algorithm.name == "svt3")
    pair = next(c for c in pattern_pairs(svt3.queries, relation=svt3.relation) if c.name == "x-shape")
    law = svt3.law(pair.first, pair.second)
    groups = value_counts.record_groups(SimpleNamespace(dataset_a=pair.datasets()[0], dataset_b=pair.datasets()[1]), 10)
    assert groups.tolist() == [0] * 5 + [1] * 5
    # one output per cell of the law: the first query above (k) with its answer at the cell's middle, or none
    edges = grid_edges(-810.0, 810.0, 4.0)  # the law's value cells (svt_values_law: 40 noise scales of 20)
    middles = np.clip((np.concatenate([[-np.inf], edges]) + np.concatenate([edges, [np.inf]])) / 2, -900, 900)
    outcomes = np.array([np.concatenate([np.full(k, bb.BELOW), [value], np.full(9 - k, bb.VALUE_ABORTED)])
                         for k in range(10) for value in middles] + [np.full(10, bb.BELOW)])
    assert law.outcomes == len(outcomes)
    best = law.ceiling(10**6)
    shares = {True: [], False: []}
    for seed in range(2, 6):
        cal_a = svt3.sample(np.asarray(pair.first, float), np.random.default_rng(100 + seed), 100_000)
        cal_b = svt3.sample(np.asarray(pair.second, float), np.random.default_rng(200 + seed), 100_000)
        for counted in (True, False):
            score = fit_discrete(cal_a, cal_b, seed=0, groups=groups, count_mixed=counted)
            assert score.values == "linear" and score.model == ("value counts" if counted else "coordinates")
            values = score(outcomes)
            order = np.lexsort((np.random.default_rng(seed).random(values.size), -values))  # ties broken at random
            shares[counted].append(law.ceiling(10**6, order=order) / best)
    assert np.mean(shares[True]) >= 0.9 and min(shares[True]) >= 0.8
    assert np.mean(shares[False]) <= 0.75


def test_coordinates_are_grouped_by_how_the_pair_moves_the_record_of_the_same_index():
    from types import SimpleNamespace

    from dpaudit.mechanisms.dataset import Dataset

    first = Dataset(np.ones((6, 1)))
    second = Dataset(np.array([[2.0], [2.0], [0.0], [0.0], [1.0], [2.0]]))
    groups = value_counts.record_groups(SimpleNamespace(dataset_a=first, dataset_b=second), 6)
    assert groups.tolist() == [2, 2, 0, 0, 1, 2]  # up, up, down, down, unchanged, up
    assert value_counts.record_groups(SimpleNamespace(dataset_a=first, dataset_b=second), 5) is None  # 5 outputs
    assert value_counts.record_groups(SimpleNamespace(dataset_a=None, dataset_b=None), 6) is None


def test_svt_outcomes_are_ordered_by_their_position_when_the_values_are_counted(monkeypatch):
    # SVT1 (c = 1) at epsilon 0.1 on the all-up pair: an outcome is the position of the first "above" (or
    # none); its log-ratio falls with the position (the law, audit/checks/zoo/svt_laws.py). On the 1.5e5
    # calibration trials per side of a 5e5 audit the per-coordinate effects are about as large as their
    # noise and order the outcomes partly by chance; the value counts order positions 1-10 as the law does
    from types import SimpleNamespace

    from dpaudit.auditing.checks.vector_pairs import pattern_pairs
    from dpaudit.auditing.checks.zoo.blackbox_suite import SUITE

    svt1 = next(algorithm for algorithm in SUITE if algorithm.name == "svt1")
    pair = next(c for c in pattern_pairs(svt1.queries, relation=svt1.relation) if c.name == "all-up")
    law = svt1.law(pair.first, pair.second)
    groups = value_counts.record_groups(SimpleNamespace(dataset_a=pair.datasets()[0], dataset_b=pair.datasets()[1]), 10)
    assert groups.tolist() == [0] * 10
    outcomes = np.array([[0.0] * 10] + [[0.0] * (k - 1) + [1.0] + [-1.0] * (10 - k) for k in range(1, 11)])
    assert law.outcomes == len(outcomes) and np.all(np.diff(law.log_ratio()[1:]) < 0)
    shares = {}
    for penalty, model in ((value_counts.POOLING_PENALTY, "value counts"), (-np.inf, "coordinates")):
        monkeypatch.setattr(value_counts, "POOLING_PENALTY", penalty)  # -inf: always one effect per coordinate
        ceilings = []
        for seed in range(3):
            cal_a = svt1.sample(np.asarray(pair.first, float), np.random.default_rng(100 + seed), 150_000)
            cal_b = svt1.sample(np.asarray(pair.second, float), np.random.default_rng(200 + seed), 150_000)
            score = fit_discrete(cal_a, cal_b, seed=0, groups=groups)
            assert score.model == model
            values = score(outcomes)
            if model == "value counts":
                assert np.all(np.diff(values[1:]) < 0)
            ceilings.append(law.ceiling(350_000, order=np.argsort(-values, kind="stable")))
        shares[model] = np.mean(ceilings) / law.ceiling(350_000)
    # measured: 0.968 counted, 0.920 per coordinate (seeds 0-2; 0.983 and 0.911 over seeds 0-5)
    assert shares["value counts"] >= 0.95 > shares["coordinates"]


def test_continuous_outputs_are_declined_with_a_reason():
    rng = np.random.default_rng(4)
    with pytest.raises(ParameterError, match="no coordinate with few distinct values"):
        fit_discrete(rng.normal(size=(500, 2)), rng.normal(size=(500, 2)), seed=0)


def test_discrete_is_registered_and_in_the_default_portfolio():
    assert "discrete" in registered_scores()
    assert "discrete" in [score.name for score in resolve_scores("auto")]


def test_the_portfolio_fits_on_a_share_that_grows_with_the_budget():
    from dpaudit.auditing.statistics.portfolio import SELECTION_FIT, SELECTION_SHARE, selection_fit

    assert selection_fit(600) == 300  # a small audit: the first half, as before
    assert selection_fit(8_000) == SELECTION_FIT
    assert selection_fit(2_000_000) == int(SELECTION_SHARE * 2_000_000)  # no cap


def test_the_portfolio_takes_the_outcome_table_without_a_contest():
    # randomised response: every score is a function of the outcome, and the table estimates the best
    import dpaudit
    from tests import discrete_algorithms as algorithms

    algorithm = algorithms.randomized_response(1.0)
    result = dpaudit.audit(algorithm.mechanism, dataset_pair=algorithm.pair, trials=20_000, delta=0.0, seed=0,
                           score=["projection", "discrete"])
    chosen = [row for row in result.attack["portfolio"] if row["chosen"]]
    assert [row["name"] for row in chosen] == ["discrete"]
    assert 0 < result.epsilon_lower_bound <= 1.0


def test_the_default_portfolio_does_not_depend_on_which_module_was_imported_first():
    # its order enters every audit's id (and the portfolio's tie-breaks): a process that imported the
    # discrete score's module first must build the same portfolio, or a resumed audit recomputes every chunk
    import subprocess
    import sys

    show = "from dpaudit.attacks.scores import resolve_scores; print([s.name for s in resolve_scores('auto')])"
    plain = subprocess.run([sys.executable, "-c", show], capture_output=True, text=True, check=True).stdout
    early = subprocess.run([sys.executable, "-c", "import dpaudit.attacks.discrete; " + show],
                           capture_output=True, text=True, check=True).stdout
    assert plain == early and "discrete" in plain


def test_outputs_of_categories_and_sentinel_codes_prefer_the_discrete_score():
    # SVT3's shape: each coordinate a sentinel code (-1000, "below") or a released noisy answer
    rng = np.random.default_rng(6)

    def draw(shift: float, size: int) -> np.ndarray:
        return np.where(rng.random((size, 2)) < 0.4, -1000.0, rng.laplace(shift, 20.0, (size, 2)))
    cal_a, cal_b = draw(0.0, 5_000), draw(1.0, 5_000)
    assert fit_discrete(cal_a, cal_b, seed=0).preferred is True
    # a purely continuous coordinate beside them: the other scores read it as well, so no preference
    with_continuous = [np.column_stack([cal, rng.normal(size=len(cal))]) for cal in (cal_a, cal_b)]
    assert fit_discrete(*with_continuous, seed=0).preferred is False


def test_a_laplace_value_beside_a_sentinel_is_read_cut_at_its_median_and_a_gaussian_one_linearly():
    # a Laplace shift's log-ratio is a step (flat beyond the two answers), a Gaussian one's a line: the
    # reading whose calibration likelihood is larger by SPLIT_MARGIN nats is taken
    rng = np.random.default_rng(7)

    def draw(noise: str, shift: float, size: int = 20_000) -> np.ndarray:
        value = rng.laplace(shift, 1.0, size) if noise == "laplace" else rng.normal(shift, 1.0, size)
        return np.where(rng.random(size) < 0.4, -1.0, value)[:, None]
    laplace = fit_discrete(draw("laplace", 0.0), draw("laplace", 0.5), seed=0)
    assert laplace.values == "median split" and laplace.preferred is True
    (cut,) = laplace.cuts
    assert abs(cut - 0.25) < 0.05  # the pooled median, 0.25 for shifts 0 and 0.5
    # above the cut: log((1 - e^-(0.5 - cut) / 2) / (e^-cut / 2)), below it the mirror image; each cell holds
    # ~4,600 and ~7,300 trials, so the log-ratio's sampling error is 0.019 and 0.1 is 5 of them
    above = np.log1p(-0.5 * np.exp(cut - 0.5)) - np.log(0.5 * np.exp(-cut))
    scores = laplace(np.array([[cut + 0.01], [cut + 5.0], [cut - 0.01], [cut - 5.0], [-1.0]]))
    assert scores[0] == scores[1] and scores[2] == scores[3]  # nothing but the side of the cut is read
    assert abs(scores[0] - above) < 0.1 and abs(scores[2] + above) < 0.1 and abs(scores[4]) < 0.1
    gaussian = fit_discrete(draw("gaussian", 0.0), draw("gaussian", 0.5), seed=0)
    assert gaussian.values == "linear"
    tail, centre = gaussian(np.array([[3.0], [0.5]]))
    assert tail > centre + 1.0  # the line keeps growing into the tail: 0.5 per unit for this shift


def test_a_preference_seen_on_few_trials_is_checked_on_all_calibration_outputs():
    # a score preferred when fitted on few trials but not on all of them takes part in the contest
    from dpaudit.attacks.scores import BuiltinScore
    from dpaudit.auditing.statistics.portfolio import choose_score

    def fit(pair, a, b, seed):
        def score(outputs):
            return np.asarray(outputs, dtype=float)[:, 0] * 0.0
        score.preferred = len(a) < 3_000
        return score
    fickle = BuiltinScore("fickle", "preferred on few trials only", True, fit)
    projection = BuiltinScore("projection", "the output itself", False,
                              lambda pair, a, b, seed: lambda outputs: np.asarray(outputs, dtype=float)[:, 0])
    rng = np.random.default_rng(7)
    cal_a, cal_b = rng.normal(0.0, 1.0, (4_000, 1)), rng.normal(1.0, 1.0, (4_000, 1))
    chosen, _, candidates = choose_score([fickle, projection], None, cal_a, cal_b, seed=0, delta=0.0,
                                         confidence=0.95)
    # the contest: a constant score certifies nothing, the projection separates N(0, 1) from N(1, 1)
    assert chosen.name == "projection" and [c.name for c in candidates if c.chosen] == ["projection"]


def test_the_discrete_score_calibrates_on_its_share_and_a_rerun_reuses_every_chunk(tmp_path):
    # the outcome table asks for CALIBRATION_SHARE of the trials (audit.jobs.runner widens the calibration
    # part out of the certification part); a rerun on the same store fits the same score from the same chunks
    import dpaudit
    from tests import discrete_algorithms as algorithms

    algorithm = algorithms.randomized_response(1.0)
    store = str(tmp_path / "store.sqlite")
    first = dpaudit.audit(algorithm.mechanism, dataset_pair=algorithm.pair, trials=20_000, delta=0.0, seed=0,
                          store=store)
    assert [row["name"] for row in first.attack["portfolio"] if row["chosen"]] == ["discrete"]
    assert first.attack["calibration_trials"] == int(discrete.CALIBRATION_SHARE * 20_000)
    certified = first.to_dict()["per_index"][0]["distributions"]["histogram"]["a"]
    assert sum(certified) == 20_000 - first.attack["calibration_trials"]  # taken out of certification
    again = dpaudit.audit(algorithm.mechanism, dataset_pair=algorithm.pair, trials=20_000, delta=0.0, seed=0,
                          store=store)
    assert again.timings["chunks_computed"] == 0
    assert again.epsilon_lower_bound == first.epsilon_lower_bound


def test_a_larger_calibration_fraction_than_the_share_is_kept():
    import dpaudit
    from tests import discrete_algorithms as algorithms

    algorithm = algorithms.randomized_response(1.0)
    result = dpaudit.audit(algorithm.mechanism, dataset_pair=algorithm.pair, trials=20_000, delta=0.0, seed=0,
                           calibration_fraction=0.4)
    assert result.attack["calibration_trials"] == 8_000
    # a score that asks for no share keeps the setting (10% by default)
    gaussian = dpaudit.audit(algorithm.mechanism, dataset_pair=algorithm.pair, trials=20_000, delta=0.0, seed=0,
                             score="projection")
    assert gaussian.attack["calibration_trials"] == 2_000


def test_a_fitted_score_s_calibration_share_is_checked():
    from dpaudit.attacks.score_protocol import fitted_calibration_share

    def score(outputs):
        return np.zeros(len(outputs))
    assert fitted_calibration_share(score) == 0.0
    score.calibration_share = 0.3
    assert fitted_calibration_share(score) == 0.3
    for bad in (0.5, -0.1, "0.3", True):
        score.calibration_share = bad
        with pytest.raises(ParameterError, match="calibration_share"):
            fitted_calibration_share(score)
