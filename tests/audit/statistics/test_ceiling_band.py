"""The ceiling's band (audit/statistics/ceiling.py; docs/theory.md 3.4): where 95% of ideal threshold audits land."""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pytest

from dpaudit.auditing.jobs.config import parse_config
from dpaudit.auditing.jobs.result import load_result
from dpaudit.auditing.jobs.runner import RunOptions
from dpaudit.auditing.statistics.ceiling import (
    BAND_DRAWS,
    _exact_conditional,
    _gaussian_rates,
    _law_rates,
    _oracle,
    _rates,
    _single_rate_bounds,
    exact_ceiling_band,
    gaussian_ceiling,
    gaussian_ceiling_band,
    statistical_ceiling_band,
)
from tests.helpers import run_documents

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("trials", [10_000, 100_000, 1_000_000])
def test_band_holds_the_ceiling_and_is_reproducible(trials):
    band = gaussian_ceiling_band(1.0, trials=trials, delta=1e-5)
    assert band.ceiling == gaussian_ceiling(1.0, trials=trials, delta=1e-5)  # the same central figure
    assert band.low < band.ceiling < band.high
    assert band.draws == BAND_DRAWS
    assert gaussian_ceiling_band(1.0, trials=trials, delta=1e-5) == band  # seeded: always the same band


def test_band_narrows_as_trials_grow():
    widths = [gaussian_ceiling_band(1.0, trials=n, delta=1e-5) for n in (10_000, 1_000_000)]
    assert widths[1].high - widths[1].low < widths[0].high - widths[0].low


@pytest.mark.statistical
def test_ideal_audits_land_in_the_band_95_percent_of_the_time():
    """Fresh ideal audits (binomial counts at the oracle threshold, certified exactly, another seed) fall below
    and above the band about 2.5% of the time each. With 400 audits the count outside one end is
    Binomial(400, 0.025): mean 10, sd 3.1; the bounds below are 10 +- 4 sd (the band's own error from 4000
    draws moves each end by less than one such sd)."""
    trials, delta, beta = 100_000, 1e-5, 0.05
    band = gaussian_ceiling_band(1.0, trials=trials, delta=delta)
    rates, _, _, _ = _rates(*_gaussian_rates(1.0), trials, delta, 1 - beta)
    _, best = _oracle(rates, trials, delta, beta)
    rng = np.random.default_rng(2024)
    fp = rng.binomial(trials, rates[0][best], 400).astype(float)
    fn = rng.binomial(trials, rates[1][best], 400).astype(float)
    single = _single_rate_bounds(fp, fn, trials, delta, beta)
    bounds = np.array([max(s, _exact_conditional(a, b, trials, delta, beta), 0.0) for s, a, b in zip(single, fp, fn)])
    assert (bounds < band.low).sum() <= 23 and (bounds > band.high).sum() <= 23
    assert 0.9 <= np.mean((bounds >= band.low) & (bounds <= band.high)) <= 0.995


def test_band_of_a_tabulated_law_with_rates_off_by_rounding():
    """Cumulative sums of a tabulated law can leave [0, 1] by a rounding error; the band still draws."""
    values = np.linspace(-3, 3, 7)
    mass = np.full(7, 1 / 7)
    band = statistical_ceiling_band(lambda t: np.interp(t, values, np.cumsum(mass[::-1])[::-1] + 1e-16),
                                    lambda t: np.interp(t, values, np.cumsum(mass) - 1e-16), values,
                                    trials=1000, delta=1e-5)
    assert 0.0 <= band.low <= band.high


def test_a_kept_band_is_the_band_of_its_own_law_trials_delta_and_confidence():
    """exact_ceiling_band keeps each band it computes: asked again it gives the computed band, and a law that
    differs in one float (or at other trials, delta or confidence) gets its own."""
    values = np.linspace(-4.0, 4.0, 801)
    mass_a = np.exp(-0.5 * values**2)
    mass_b = np.exp(-0.5 * (values - 1.0) ** 2)
    mass_a, mass_b = mass_a / mass_a.sum(), mass_b / mass_b.sum()

    def direct(a, b, **settings):
        return statistical_ceiling_band(*_law_rates(values, a, b), **settings)
    settings = {"trials": 20_000, "delta": 1e-5, "confidence": 0.95}
    first = exact_ceiling_band(values, mass_a, mass_b, **settings)
    assert first == direct(mass_a, mass_b, **settings)
    assert exact_ceiling_band(values.copy(), mass_a.copy(), mass_b.copy(), **settings) is first  # kept
    moved = mass_b.copy()
    moved[400] = np.nextafter(moved[400], 1.0)  # one ulp of one mass
    assert exact_ceiling_band(values, mass_a, moved, **settings) is not first
    for change in ({"trials": 20_001}, {"delta": 1e-4}, {"confidence": 0.9}):
        other = {**settings, **change}
        assert exact_ceiling_band(values, mass_a, mass_b, **other) == direct(mass_a, mass_b, **other) != first


def test_dp_sgd_results_give_the_band_beside_the_ceiling(tmp_path):
    """examples/dp_sgd.toml at a CI budget (10^4 trials per side, 3 seeds): low <= ceiling <= high, and each
    certified bound lies at or below the band's top (an audit that chooses its threshold on calibration trials
    certifies at most what an ideal one does, and above the top only 2.5% of the time)."""
    raw = tomllib.loads((ROOT / "examples" / "dp_sgd.toml").read_text(encoding="utf-8"))
    configs = [parse_config({**raw, "audit": {**raw["audit"], "trials": 10_000, "seed": seed}})[0]
               for seed in range(3)]
    documents = run_documents(configs, RunOptions(store=str(tmp_path / "s.sqlite"), workers=1, progress=False))
    assert len(documents) == 3
    for document in documents:
        for row in document["per_index"]:
            low, high = row["ceiling_band"]
            assert low <= row["ceiling"] <= high
            assert row["empirical"]["epsilon_lower_bound"] <= high
        assert load_result(document).per_index[0].ceiling_band == tuple(document["per_index"][0]["ceiling_band"])
