"""The neighbour search on records of several columns (a label flip) and on large datasets (a float-sum bug).

Both mechanisms are correct on the pairs the search built before (records of
one number, a few records each) and leak on another kind of pair:

- a noisy sum of the features with the label column summed as if it were
  public (Laplace(0.1)): a flip of one label moves it by 1, epsilon 10
  against a claim of 1; feature moves see Laplace(2) on a sensitivity of 2,
  epsilon 1. Certified 5.52 on 10^4 trials (seed 0).
- a naive sequential float sum over ``[2^45, 2^45 + 1]`` plus Laplace(1), a
  claim of 1 for the replace-one sensitivity ``U - L = 1`` (Casacuberta et
  al. 2022, a sized sum with bounds far from zero): on every small candidate
  the computed sums of a pair differ by at most 1, on 2,000 records their
  float spacing is 8 and a boundary pair moves the sum by 8. Certified 4.48
  on 10^4 trials (seed 0).

Bounds are certified at confidence 0.95 on fresh trials, far above the
claims; the exact values (10; 8, or ln(0.98 / 0.009) = 4.7 after the output's
own rounding to the spacing 8) are the ceilings.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import dpaudit
from dpaudit.auditing.checks.search import candidate_pairs
from dpaudit.auditing.checks.search_large import LARGE_RECORDS, far_from_zero, large_pairs
from dpaudit.auditing.checks.search_records import parse_domain, record_pairs
from dpaudit.cli import main
from dpaudit.core.errors import ParameterError


def _snap(values: np.ndarray) -> np.ndarray:
    return np.rint(values * 4096.0) / 4096.0


def label_leak(records, rng, trials):
    """Features in [-1, 1] summed with Laplace(2) (epsilon 1); the labels summed as if public."""
    x, y = np.clip(records[:, 0], -1.0, 1.0), records[:, 1]
    return _snap(np.column_stack([x.sum() + rng.laplace(0.0, 2.0, trials), y.sum() + rng.laplace(0.0, 0.1, trials)]))


def test_a_two_column_search_finds_the_label_flip():
    mech = dpaudit.from_batched_callable(label_leak, 2)
    found = dpaudit.search(mech, record_domain=(-1.0, 1.0), labels=(0.0, 1.0), relation="replace-one", epsilon=1.0,
                           trials=10_000, screen_trials=100, seed=0)
    first, second = np.array(found.chosen["S"]), np.array(found.chosen["S_prime"])
    assert first.shape == second.shape and first.shape[1] == 2
    changed = np.flatnonzero(np.any(first != second, axis=1))
    assert len(changed) == 1 and first[changed[0], 1] != second[changed[0], 1]  # the label is flipped
    assert found.chosen["relation"] == "replace-one" and found.violation and found.epsilon_lower_bound > 3.0


def test_record_pairs_flip_labels_and_move_features_to_their_extremes():
    columns, labels = parse_domain([(-1.0, 1.0), (0.0, 5.0)], (-1, 1))
    pairs = record_pairs(columns, labels)
    assert {p.first.records.shape[1] for p in pairs} == {3} and {p.relation for p in pairs} == {"replace-one",
                                                                                                  "add-remove"}
    moved = {(tuple(p.first.records[-1]), tuple(p.second.records[-1])) for p in pairs if p.name.startswith("empty |")}
    assert ((1.0, 5.0, -1.0), (1.0, 5.0, 1.0)) in moved  # a label flip at the high point
    assert ((-1.0, 0.0, 1.0), (1.0, 5.0, 1.0)) in moved  # every feature from its low end to its high end
    assert ((0.0, 0.0, 1.0), (0.0, 5.0, 1.0)) in moved  # one column end to end, the others at the centre
    assert ((-1.0, 0.0, -1.0), (1.0, 5.0, 1.0)) in moved  # both at once
    for pair in pairs:  # every record in its column's range, labels among the labels
        for records in (pair.first.records, pair.second.records):
            assert np.all((records[:, 0] >= -1) & (records[:, 0] <= 1) & (records[:, 1] >= 0) & (records[:, 1] <= 5))
            assert set(records[:, 2]) <= {-1.0, 1.0}
    for bad, match in ((((0, 1), (2, 1)), "record_domain"), ((0.0, 1.0, 2.0), "record_domain")):
        with pytest.raises(ParameterError, match=match):
            parse_domain(bad)
    with pytest.raises(ParameterError, match="labels must be two or more distinct"):
        parse_domain((0.0, 1.0), labels=(1.0,))
    with pytest.raises(ParameterError, match="background must hold records of 3 columns"):
        record_pairs(columns, labels, background=np.zeros((2, 2)))
    mech = dpaudit.from_batched_callable(label_leak, 2)
    with pytest.raises(ParameterError, match="thresholds apply to records of one number"):
        dpaudit.search(mech, record_domain=(-1.0, 1.0), labels=(0, 1), thresholds=[0.5])


LOW, HIGH = 2.0**45, 2.0**45 + 1.0  # bounds far from zero: 2,000 of them sum to a float spacing of 8


def _naive_sum(records: np.ndarray) -> float:
    return float(np.cumsum(np.clip(records[:, 0], LOW, HIGH))[-1])  # a loop's sequential float sum


def naive_sum(records, rng, trials):
    """The sized sum's noise for the sensitivity U - L = 1 at epsilon 1, on a naive float sum."""
    return (_naive_sum(records) + rng.laplace(0.0, HIGH - LOW, trials))[:, None]


def test_large_datasets_find_a_float_sum_sensitivity_bug():
    pairs = candidate_pairs(LOW, HIGH, relations=["replace-one"])
    small = [p for p in pairs if p.first.n <= 64]
    large = [p for p in pairs if p.first.n == LARGE_RECORDS]
    assert small and len(large) >= 40 and len(small) + len(large) == len(pairs)
    # the bug never shows on a small dataset: the computed sums of a pair differ by at most U - L
    assert max(abs(_naive_sum(p.first.records) - _naive_sum(p.second.records)) for p in small) <= HIGH - LOW
    assert max(abs(_naive_sum(p.first.records) - _naive_sum(p.second.records)) for p in large) == 8.0
    mech = dpaudit.from_batched_callable(naive_sum, 1, record_domain=(LOW, HIGH))
    with np.errstate(all="ignore"):  # the gaussian score's fit overflows on outputs near 2^56
        found = dpaudit.search(mech, epsilon=1.0, relation="replace-one", trials=10_000, screen_trials=100, seed=0)
    assert found.chosen["name"].startswith("large:") and found.chosen["S"]["records"] == LARGE_RECORDS
    assert found.violation and found.epsilon_lower_bound > 2.0


def test_the_large_family_is_bounded_and_grows_only_far_from_zero():
    assert not far_from_zero(0.0, 1.0, LARGE_RECORDS) and far_from_zero(LOW, HIGH, LARGE_RECORDS)
    near, far = large_pairs(0.0, 1.0), large_pairs(LOW, HIGH)
    assert len(near) == 12 and 12 < len(far) <= 80
    for pair in far:
        assert {pair.first.n, pair.second.n} <= {LARGE_RECORDS - 1, LARGE_RECORDS}
        records = np.concatenate([pair.first.records, pair.second.records])
        assert records.min() >= LOW and records.max() <= HIGH
        if pair.relation == "replace-one":  # the first or the last record changed, from low to high
            changed = np.flatnonzero(pair.first.records[:, 0] != pair.second.records[:, 0])
            assert list(changed) in ([0], [LARGE_RECORDS - 1])
    assert not any(p.first.n > 64 for p in candidate_pairs(0.0, 1.0, large_records=0))
    with pytest.raises(ParameterError, match="large_records"):
        dpaudit.search(dpaudit.from_batched_callable(naive_sum, 1, record_domain=(LOW, HIGH)), large_records=-1)


def test_dpaudit_search_command_takes_columns_labels_and_the_relation(tmp_path, capsys):
    path = tmp_path / "leaky.py"
    path.write_text("import numpy as np\n\n"
                    "def label_leak(records, rng, trials):\n"
                    "    x, y = np.clip(records[:, 0], -1.0, 1.0), records[:, 1]\n"
                    "    return np.column_stack([x.sum() + rng.laplace(0.0, 2.0, trials),\n"
                    "                            y.sum() + rng.laplace(0.0, 0.1, trials)])\n")
    common = ["search", "--function", f"{path}:label_leak", "--batched", "--output-dim", "2", "--domain", "-1", "1"]
    assert main([*common, "--labels", "0", "1", "--relation", "replace-one", "--epsilon", "1", "--trials", "4000",
                 "--screen-trials", "100", "--large-records", "0", "--json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["violation"] and document["relations"] == ["replace-one"] and document["claim_relations"] is None
    assert "label" in document["chosen"]["name"]
    assert main([*common, "--relation", "one-answer"]) == 2
    assert "--relation one-answer applies to --queries" in capsys.readouterr().err
