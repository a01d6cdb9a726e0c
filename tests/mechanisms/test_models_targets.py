"""Issue 71: target records, neighbouring relations, initial parameters and full-batch claims of ``model``."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import dpaudit
from dpaudit.attacks.canaries import CanarySpec
from dpaudit.attacks.scores import get_score
from dpaudit.auditing.jobs.config import ConfigError, load_configs, parse_config
from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.accounting.profiles import gaussian_epsilon
from dpaudit.mechanisms.models import mechanism as model_module
from dpaudit.mechanisms.models.training import Schedule

pytest.importorskip("sklearn", reason="the bundled datasets need the 'models' extra (scikit-learn)")

#: a small full-batch training: iris (150 records), an MLP of 8 units, 10 steps at GDP mu = sqrt(10) / sigma = 2
FULL = dict(model="mlp", data="iris", hidden=8, batch_size=150, steps=10, noise_multiplier=math.sqrt(10) / 2,
            eta=1.0)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_trials(monkeypatch):
    """Any trial drawn fails the test: what it guards is checked before sampling."""
    def refuse(*args, **kwargs):
        raise AssertionError("a trial was drawn")
    monkeypatch.setattr(model_module.ModelTraining, "_sample", refuse)


@pytest.mark.parametrize("params, message", [
    ({"init": "warm"}, "init must be one of seed, random, worst-case, a .npy file"),
    ({"init": "worst-case", "init_steps": 0}, "init_steps must be >= 1"),
    ({"init_steps": 50}, "parameter 'init_steps' does not apply"),
    ({"init": 3}, "init must be one of seed, random, worst-case"),
])
def test_bad_initial_parameters_are_refused_naming_init(params, message, no_trials):
    with pytest.raises(ParameterError, match=message):
        dpaudit.make("model", data="iris", model="softmax", **params)


def test_given_initial_parameters_are_read_and_checked(tmp_path, no_trials):
    mech = dpaudit.make("model", data="iris", model="softmax", batch_size=16, steps=2)
    flat = mech.initial_parameters + 0.5
    path = tmp_path / "start.npy"
    np.save(path, flat)
    given = dpaudit.make("model", data="iris", model="softmax", batch_size=16, steps=2, init=str(path))
    np.testing.assert_array_equal(given.initial_parameters, flat)
    assert "given" in given.start_description and given.fingerprint_data == flat.tobytes()
    from_array = dpaudit.make("model", data="iris", model="softmax", batch_size=16, steps=2, init=flat)
    assert from_array.params["init"].startswith(f"array of {flat.size} sha256:")
    np.save(path, flat[:-1])
    with pytest.raises(ParameterError, match=f"init must hold the model's {flat.size} parameters"):
        dpaudit.make("model", data="iris", model="softmax", init=str(path))
    np.save(path, np.full(flat.size, np.nan))
    with pytest.raises(ParameterError, match="init must hold finite numbers"):
        dpaudit.make("model", data="iris", model="softmax", init=str(path))


def test_worst_case_and_random_starts():
    worst = dpaudit.make("model", data="iris", model="softmax", batch_size=150, steps=2, init="worst-case",
                         init_steps=200)
    seed = dpaudit.make("model", data="iris", model="softmax", batch_size=150, steps=2)
    records = np.asarray(seed.records)
    # pre-training shrinks the records' clipped gradients at the start (Annamalai and De Cristofaro 2024)
    shrink = [np.linalg.norm(m._start_gradients(records[:, :-1], records[:, -1]), axis=1).mean() for m in (seed,
                                                                                                            worst)]
    assert shrink[1] < 0.5 * shrink[0] and "worst case" in worst.start_description
    again = dpaudit.make("model", data="iris", model="softmax", batch_size=150, steps=2, init="worst-case",
                         init_steps=200)
    np.testing.assert_array_equal(again.initial_parameters, worst.initial_parameters)
    random = dpaudit.make("model", data="iris", model="softmax", batch_size=150, steps=1, eta=1e-9,
                          noise_multiplier=1e-9, init="random")
    starts = random.sample(trials=4, seed=3)
    assert len({tuple(row) for row in starts}) == 4  # a fresh start per trial
    np.testing.assert_array_equal(starts, random.sample(trials=4, seed=3))


@pytest.mark.parametrize("canary, message", [
    ({"target": "bogus"}, "canary target must be one of gradient-aligned"),
    ({"target": 151}, r"canary target must be a record index in 1\.\.150, got target=151"),
    ({"target": [0.0, 1.0, 2.0]}, "canary target must have 5 numbers"),
    ({"target": [0.0, 0.0, 0.0, 0.0, 7.0]}, r"canary target's label .* must be an integer in 0\.\.2, got 7"),
    ({"target": True}, "canary target must be a name, a record index"),
    ({"kind": "gradient", "target": "blank"}, "canary target chooses the record of an input canary"),
    ({"pair": "remove"}, "canary pair 'remove' .* needs Poisson batches"),
])
def test_bad_canary_targets_and_pairs_are_refused(canary, message, no_trials):
    mech = dpaudit.make("model", model="softmax", data="iris", batch_size=16, steps=2,
                        sampling="without-replacement" if canary.get("pair") == "remove" else "poisson")
    with pytest.raises(ParameterError, match=message):
        dpaudit.audit(mech, canary=canary, trials=100)


def test_targets_and_replace_pairs_need_a_model(no_trials):
    with pytest.raises(ParameterError, match="canary target chooses the record"):
        dpaudit.audit(dpaudit.make("gaussian"), canary={"target": "blank"}, trials=100)
    with pytest.raises(ParameterError, match="canary pair 'replace'"):
        dpaudit.audit(dpaudit.make("gaussian"), canary={"pair": "replace"}, trials=100)


@pytest.mark.parametrize("canary, key", [({"target": "bogus"}, "target"), ({"target": 999}, "target"),
                                         ({"kind": "gradient", "pair": "replace"}, "pair")])
def test_a_config_refuses_bad_target_keys_when_read(canary, key, no_trials):
    raw = {"mechanism": {"name": "model", "model": "softmax", "data": "iris", "steps": 2, "batch_size": 16},
           "canary": canary, "audit": {"trials": 100}}
    with pytest.raises(ConfigError, match=rf"\[canary\] .*{key}"):
        parse_config(raw)


def test_add_remove_pair_asks_the_accountant_at_the_configured_rate(monkeypatch):
    mech = dpaudit.make("model", model="softmax", data="iris", batch_size=30, steps=3, noise_multiplier=1.0)
    pair = CanarySpec(kind="input").build(mech, mech.n_records)
    assert pair.relation == "add-remove" and (pair.dataset_a.n, pair.dataset_b.n) == (150, 149)
    seen = []

    def record(stacked, records, injected, schedule, trials, rng, **kwargs):
        seen.append((records.shape[0], schedule.poisson_rate(records.shape[0])))
        return stacked.flat.expand(trials, -1).clone()

    monkeypatch.setattr(model_module, "train", record)
    mech.sample(pair.dataset_a, trials=2, seed=0)
    mech.sample(pair.dataset_b, trials=2, seed=0)
    assert seen == [(150, 0.2), (149, 0.2)]  # both sides at q = m / n of the configured n
    claims = {c.name: c for c in mech.claims()}
    by_relation = {c.relation for c in claims.values() if c.applicable}
    assert by_relation == {"add-remove", "replace-one"} and claims["sgm-pld-replace"].relation == "replace-one"
    assert Schedule(1, 30, "poisson", 1.0, 1.0, 1.0, 0.0, rate=0.2).poisson_rate(149) == 0.2


def test_full_batch_claims_are_applicable_upper_bounds():
    mech = dpaudit.make("model", **FULL)
    claims = {c.name: c for c in mech.claims()}
    full = claims["full-batch-composition"]
    assert full.applicable and full.kind == "upper-bound" and full.relation == "add-remove"
    assert full.epsilon(1e-5) == pytest.approx(gaussian_epsilon(1e-5, 2.0), rel=1e-9)
    assert claims["full-batch-composition-replace"].epsilon(1e-5) == pytest.approx(gaussian_epsilon(1e-5, 4.0),
                                                                                   rel=1e-9)
    assert "last-iterate-surrogate" not in claims  # at rate 1 the reference would equal the bound
    below = {c.name: c for c in dpaudit.make("model", **{**FULL, "batch_size": 75}).claims()}
    assert "full-batch-composition" not in below and not below["last-iterate-surrogate"].applicable
    for pair, relation, mu in (("remove", "add-remove", 2.0), ("zero", "add-remove", 2.0),
                               ("replace", "replace-one", 4.0), ("opposite", "replace-one", 4.0)):
        built = CanarySpec(kind="input", pair=pair, target="blank").build(mech, 150)
        assert built.relation == relation, pair
        values, mass_a, mass_b = mech.score_law(built.dataset_a, built.dataset_b)
        # the ceiling's law: total variation of N(0, 1) and N(mu, 1)
        assert 0.5 * np.abs(mass_a - mass_b).sum() == pytest.approx(math.erf(mu / 2 / math.sqrt(2)), abs=1e-3), pair


def test_crafted_targets_are_fixed_by_the_start_and_the_other_records(no_trials):
    def fresh():
        return dpaudit.make("model", model="mlp", data="digits", n=200, hidden=4, batch_size=200, steps=2)

    mech = fresh()
    records = np.asarray(mech.records)
    built = {}
    for target in ("gradient-aligned", "blank", "clipbkd", "mislabelled", 7, [0.1] * 64 + [3]):
        spec = CanarySpec(kind="input", target=target)
        first = spec.build(mech, 200)
        record = first.dataset_a.records[199]
        assert first.target and record.shape == (65,)
        built[str(target)] = record
        if target in ("gradient-aligned", "clipbkd"):  # crafted again by a mechanism built afresh: the same
            second = spec.build(fresh(), 200)
            np.testing.assert_array_equal(record, second.dataset_a.records[199])
            np.testing.assert_array_equal(first.direction, second.direction)
            assert first.target == second.target
    assert not built["blank"][:-1].any()
    assert np.linalg.norm(built["clipbkd"][:-1]) == pytest.approx(np.linalg.norm(records[:, :-1], axis=1).mean())
    assert built["mislabelled"][-1] != records[199, -1]
    np.testing.assert_array_equal(built["mislabelled"][:-1], records[199, :-1])
    np.testing.assert_array_equal(built["7"], records[6])
    # digits has pixels blank in every record: the gradient-aligned target's clipped gradient lies almost wholly
    # where the other records' gradients do not reach
    aligned = built["gradient-aligned"]
    gradient = mech._start_gradients(aligned[None, :-1], aligned[None, -1])[0]
    others = mech._start_gradients(records[:199, :-1], records[:199, -1])
    _, _, basis = np.linalg.svd(others, full_matrices=False)
    outside = gradient - (gradient @ basis.T) @ basis
    assert np.linalg.norm(outside) > 0.9 * np.linalg.norm(gradient) and np.linalg.norm(gradient) == pytest.approx(1.0)


def test_the_default_canary_certifies_more_than_the_old_one():
    """The default (a gradient-aligned target removed from S') against the input canary of earlier releases at
    the same relation (unit features along the first axis, label 1, removed): 500 trials per side."""
    mech = dpaudit.make("model", **FULL)
    new = dpaudit.audit(mech, score="projection", trials=500)
    old = dpaudit.audit(mech, canary={"target": "direction", "pair": "remove"}, score="projection", trials=500)
    assert new.canary["relation"] == old.canary["relation"] == "add-remove"
    low, high = new.per_index[0].ceiling_band
    spread = (high - low) / 3.92  # the sampling spread of one certified bound at these trials (the band: +-1.96)
    gap = new.empirical.epsilon_lower_bound - old.empirical.epsilon_lower_bound
    assert gap > 2 * spread, (new.empirical.epsilon_lower_bound, old.empirical.epsilon_lower_bound, spread)
    assert new.verdict == old.verdict == "consistent"


def test_a_full_batch_projection_is_placed_by_its_tilt(monkeypatch):
    """At rate 1 the white-box projection is a Gaussian shift: its test is placed by the exponential tilt of its
    calibration scores (``audit.statistics.tilt``); below rate 1 (a Gaussian mixture) by the counts."""
    full = dpaudit.make("model", **FULL, init="worst-case", init_steps=200)
    assert full.projection_tail_model == "tilt"
    assert dpaudit.make("model", **{**FULL, "batch_size": 75}).projection_tail_model == "calibration"
    assert dpaudit.make("model", **FULL, init="random").projection_tail_model == "calibration"  # the start moves it
    pair = CanarySpec(kind="input").build(full, 150)
    assert get_score("projection").fit(pair).tail_model == "tilt"
    tilted = dpaudit.audit(full, score="projection", trials=500)
    assert tilted.empirical.epsilon["placement"] == "tilt"
    monkeypatch.setattr(model_module.ModelTraining, "projection_tail_model", "calibration")
    counted = dpaudit.audit(full, score="projection", trials=500)
    assert counted.empirical.epsilon["placement"].startswith("calibration")


def test_the_papers_setting_is_one_config(no_trials):
    """Annamalai and De Cristofaro's setting (docs/guide.md): read and checked, nothing trained."""
    configs = load_configs([ROOT / "examples" / "models" / "digits_mlp_full_batch.toml"])
    assert [c.resolved["attack"]["score"] for c in configs] == ["projection", "canary-loss"]
    for config in configs:
        mech = config.mechanism
        assert (mech.model, mech.data, mech.batch_size, mech.n_records, mech.steps, mech.init) == (
            "mlp", "digits", 1797, 1797, 100, "worst-case")
        claims = {c.name: c for c in mech.claims()}
        assert claims["full-batch-composition"].epsilon(config.audit["delta"]) == pytest.approx(10.0, abs=0.01)
        assert config.audit["trials"] == 1000 and config.canary.pair_for(mech) == "remove"


def test_the_device_path_takes_per_trial_starts_and_the_fixed_rate(monkeypatch):
    """The GPU path's arithmetic run on CPU tensors: each block starts where ``starts`` says, and Poisson masks
    keep the configured rate on a dataset one record short (the S' of add/remove)."""
    import torch

    from dpaudit.mechanisms.models import device, training
    from dpaudit.mechanisms.models.networks import Stacked

    monkeypatch.setattr(device, "device_block", lambda trials, *args: 4)
    mech = dpaudit.make("model", model="mlp", data="iris", hidden=4, steps=1, batch_size=30, init="random")
    stacked = Stacked(mech._template)
    records = torch.as_tensor(np.array(mech.records))[:149]
    schedule = training.Schedule(1, 30, "poisson", 1.0, 1e-12, 1e-12, 0.0, rate=0.2)
    empty = training.Injected({}, 149, stacked.size, torch.float64)
    out = device.train_on_device(stacked, records, empty, schedule, 8, np.random.default_rng(1), starts=mech._starts())
    rng = np.random.default_rng(1)
    rng.integers(2**63 - 1)  # the device generator's seed is drawn first
    expected = torch.cat([mech._starts()(4, rng), mech._starts()(4, rng)])
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-9)
    mask = device._Draws(0, torch.device("cpu"), 4000, 149, schedule).mask(0)
    assert abs(mask.double().mean().item() - 0.2) < 5 * math.sqrt(0.2 * 0.8 / (4000 * 149))
