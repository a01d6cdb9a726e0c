"""One-run canaries: Dirac coordinates and their blocks, the choice validated, interference measured, the drift fit."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import dpaudit
from dpaudit.auditing.checks.designs import AuditOptions, AuditTarget
from dpaudit.auditing.jobs.one_run_design import canary_dataset, dirac_coordinates, draw_canaries, train
from dpaudit.auditing.jobs.one_run_result import gaussian_pair_estimate, one_run_result
from dpaudit.auditing.jobs.one_run_scores import canary_scores, fit_groups
from dpaudit.auditing.statistics.one_run_ceiling import canary_overlap, draw_free_scores, interference_free
from dpaudit.cli import main
from dpaudit.mechanisms.accounting.last_iterate import count_mixture


def _job(mech, canaries: int, directions: str | None = None, seed: int = 0):
    return dpaudit.OneRun(canaries=canaries, directions=directions).job(AuditTarget(mech), AuditOptions(seed=seed))


def test_dirac_canaries_are_distinct_signed_coordinates_while_they_fit():
    mech = dpaudit.make("model", model="softmax", data="digits", steps=2, batch_size=256)  # 650 parameters
    dirac, random = (draw_canaries(_job(mech, 400, directions), 0) for directions in ("dirac", "random"))
    assert np.unique(dirac.coordinates).size == 400 and dirac.coordinates.max() < mech.parameter_count
    assert set(np.unique(dirac.signs)) == {-1.0, 1.0} and dirac.directions is None
    vector = dirac.gradient(7, mech.parameter_count)
    assert np.count_nonzero(vector) == 1 and vector[dirac.coordinates[7]] == dirac.signs[7]
    # the same seed includes the same canaries at the same positions whichever the directions
    assert np.array_equal(dirac.positions, random.positions) and np.array_equal(dirac.included, random.included)
    assert random.coordinates is None and np.allclose(np.linalg.norm(random.directions, axis=1), 1.0)
    # an included Dirac canary injects C at its coordinate; an excluded one a zero gradient
    data = canary_dataset(_job(mech, 400, "dirac"), dirac)
    for number in (0, 1, 2):
        injected = data.injected[int(dirac.positions[number])]
        assert np.array_equal(injected, mech.clip * dirac.gradient(number, 650) * dirac.included[number])
    assert canary_overlap(400, 650, "dirac") == 0.0


@pytest.mark.parametrize("canaries, parameters", [(100, 15), (45, 15), (1000, 410)])
def test_canaries_that_outnumber_parameters_share_them_in_equal_blocks(canaries, parameters):
    coordinates = dirac_coordinates(np.random.default_rng(3), canaries, parameters)
    counts = np.bincount(coordinates, minlength=parameters)
    full = canaries // parameters
    assert counts.sum() == canaries and set(counts) <= {full, full + 1}  # blocks of equal size, one apart
    assert np.count_nonzero(counts == full + 1) == canaries % parameters
    # each canary's score carries the others of its block: the overlap the report states
    assert canary_overlap(canaries, parameters, "dirac") == pytest.approx(np.mean(counts[coordinates] - 1))
    assert canary_overlap(canaries, parameters, "dirac") >= canaries / parameters - 1 - 1e-12  # the frame bound
    assert canary_overlap(canaries, parameters, "random") == pytest.approx((canaries - 1) / parameters)


def test_a_job_with_more_canaries_than_parameters_draws_blocks():
    mech = dpaudit.make("model", model="softmax", data="iris", steps=2, batch_size=16)  # 15 parameters
    canaries = draw_canaries(_job(mech, 100, "dirac"), 0)
    assert set(np.bincount(canaries.coordinates, minlength=15)) == {6, 7}


def test_the_choice_is_validated_before_any_trial(tmp_path, capsys, monkeypatch):
    with pytest.raises(dpaudit.ParameterError, match="directions must be one of 'dirac', 'random', got "
                                                     "directions='diract'; did you mean 'dirac'"):
        dpaudit.OneRun(directions="diract")
    with pytest.raises(dpaudit.ParameterError, match="directions applies to gradient canaries only"):
        dpaudit.OneRun(kind="input", directions="dirac")
    assert dpaudit.OneRun().directions is None and dpaudit.OneRun(directions="dirac").directions == "dirac"

    def no_training(*args, **kwargs):
        raise AssertionError("a training ran before the config was refused")

    monkeypatch.setattr("dpaudit.auditing.jobs.one_run_design.train", no_training)
    base = ('[mechanism]\nname = "model"\nmodel = "softmax"\ndata = "iris"\nsteps = 2\nbatch_size = 16\n'
            '[canary]\nkind = "{kind}"\ndirections = "{value}"\n[audit]\n{design}')
    cases = [("gradient", "diagonal", 'design = "one-run"\ncanaries = 20',
              "[canary] directions must be one of 'dirac', 'random', got directions='diagonal'"),
             ("input", "dirac", 'design = "one-run"\ncanaries = 20',
              "[canary] directions applies to gradient canaries only"),
             ("gradient", "dirac", "trials = 100", "[canary] directions: directions='dirac' applies to design = "
                                                   "'one-run' only")]
    for number, (kind, value, design, message) in enumerate(cases):
        path = tmp_path / f"c{number}.toml"
        path.write_text(base.format(kind=kind, value=value, design=design))
        assert main(["run", str(path), "--store", str(tmp_path / "s.sqlite"), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err


def test_dirac_canaries_do_not_interfere_and_random_ones_do_as_predicted():
    """Every record in every batch (rate 1) and the same training seed: flipping the inclusion of half the
    canaries changes the others' scores only through what their directions share. A random direction's score
    moves by sum_k +-T <u_i, u_k> over the F flipped canaries, of mean square T^2 F / P; a Dirac canary's by
    nothing but the loss's curvature."""
    steps = 10
    mech = dpaudit.make("model", model="softmax", data="digits", steps=steps, batch_size=1797,
                        noise_multiplier=1.0, eta=1.0)
    parameters = mech.parameter_count
    flip = np.random.default_rng(1).integers(0, 2, 600).astype(bool)
    change = {}
    for directions in ("dirac", "random"):
        job = _job(mech, 600, directions)
        canaries = draw_canaries(job, 0)
        flipped = dataclasses.replace(canaries, included=np.where(flip, 1 - canaries.included, canaries.included))
        finals = []
        for drawn in (canaries, flipped):
            outputs = mech.sample(canary_dataset(job, drawn), trials=1, seed=np.random.SeedSequence(5))
            finals.append(np.asarray(outputs[0, -parameters:], dtype=float))
        unit = mech.eta / mech.batch_size  # one canary's gradient C = 1 moves its coordinate by eta / B per step
        moved = [canary_scores(job, canaries, final, drift=False)[~flip] / unit for final in finals]
        change[directions] = float(np.sqrt(np.mean((moved[0] - moved[1]) ** 2)))
    predicted = steps * np.sqrt(flip.sum() / parameters)
    # the mean square over n ~ 300 unflipped canaries of nearly Gaussian changes has relative standard error
    # sqrt(2 / n) = 0.08, so the root mean square 0.04: five of them allow 0.8 to 1.2 of the prediction
    assert 0.8 * predicted < change["random"] < 1.2 * predicted, (change, predicted)
    # no shared coordinate: what is left is the curvature of the loss (measured 0.02 of the random prediction)
    assert change["dirac"] < 0.1 * predicted, (change, predicted)


def test_the_drift_fit_reads_the_release_only_and_separates_the_canaries():
    mech = dpaudit.make("model", model="softmax", data="digits", steps=10, batch_size=1797, noise_multiplier=1.0,
                        eta=1.0)
    job = _job(mech, 600, "random")
    canaries, final = train(job, 0)
    scores = canary_scores(job, canaries, final)
    other = dataclasses.replace(canaries, included=1 - canaries.included)
    assert np.array_equal(canary_scores(job, other, final), scores)  # a post-processing of the release
    raw = canary_scores(job, canaries, final, drift=False)
    mu = {name: gaussian_pair_estimate(values, canaries.included, 1e-5)["mu"]
          for name, values in (("raw", raw), ("fit", scores))}
    # the estimate of mu from m canaries has standard error about sqrt(4 / m + mu^2 / (2 m)); the difference
    # of two, at most sqrt(2) times the larger: four of those
    error = np.sqrt(2 * (4 + max(mu.values()) ** 2 / 2) / 600)
    assert mu["fit"] - mu["raw"] > 4 * error, (mu, error)  # measured: 0.06 raw, 0.95 fitted


def test_the_drift_fit_groups_layers_big_enough_to_fit():
    groups = fit_groups([36, 4, 360, 10])  # the CNN of examples/models/cnn: 4 + 10 coordinates are too few
    assert [g.tolist() for g in groups] == [list(range(36)), list(range(40, 400))]
    groups = fit_groups([20, 20, 5])
    assert [g.tolist() for g in groups] == [list(range(45))]  # small layers pooled


def test_free_scores_follow_the_canary_laws():
    laws = count_mixture(1.0, 0.0, steps=50, rate=0.1, std=3.0)  # Y = K + N(0, 9), K ~ Binom(50, 0.1)
    scores, included = draw_free_scores(laws, 20_000, np.random.default_rng(0))
    inside, outside = scores[included == 1], scores[included == 0]
    # means within four standard errors; the excluded side's variance within four of its standard errors
    assert abs(inside.mean() - 5.0) < 4 * np.sqrt((9 + 4.5) / inside.size)
    assert abs(outside.mean()) < 4 * np.sqrt(9 / outside.size)
    assert abs(outside.var() - 9) < 4 * 9 * np.sqrt(2 / outside.size)
    assert abs(included.mean() - 0.5) < 4 * np.sqrt(0.25 / included.size)


def test_the_report_states_the_free_figure_and_how_the_canaries_were_drawn():
    mech = dpaudit.make("model", model="softmax", data="iris", steps=10, batch_size=16, noise_multiplier=1.0)
    job = _job(mech, 100, "dirac")
    included = np.tile([0, 1], 50)
    scores = included + np.random.default_rng(0).standard_normal(100)
    result = one_run_result(job, scores, included, timings={"seconds": 0.0})
    record = result.one_run
    free = interference_free(mech.surrogate_output_laws(), canaries=100, delta=1e-5, confidence=0.95)
    assert record["interference_free"] == free.to_dict() and record["directions"] == "dirac"
    assert (f"would let the same test certify about {free.median:.3f} (the median of 21 seeded draws of 100 "
            f"canaries" in record["statement"])
    assert any("share coordinates in blocks of 6 or 7" in item for item in record["assumptions"])
    assert result.attack["score"] == "parameter-shift-less-drift" and result.canary["directions"] == "dirac"
    # every iterate released: the surrogate describes the last one only, and no figure is shown
    iterates = dpaudit.make("model", model="softmax", data="iris", steps=10, batch_size=16, output="iterates")
    other = one_run_result(_job(iterates, 100), scores, included, timings={"seconds": 0.0}).one_run
    assert other["interference_free"] is None and "free of interference" not in other["statement"]
    assert any("uniform random unit direction" in item for item in other["assumptions"])
