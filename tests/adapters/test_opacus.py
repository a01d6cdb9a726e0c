"""Opacus as its users call it (issue 60): their model and records, add/remove neighbours, the engine's own claim.

Opacus 1.x divides the noisy gradient sum by ``int(len(dataset) / len(loader))``: 12 records in batches of 4
give 4, 11 give 3, so removing a record (whose gradient is zero) rescales the noise of every released
parameter by 4/3 (opacus issues 571 and 819; the exact epsilon of the pair is 57.1 for 200 parameters,
``audit.checks.zoo.dpsgd.scaled_gaussians_epsilon``) while the engine reports 4.582 at delta 1e-5 for both.
11 against 10 records leave the divisor at 3: that pair's two laws are the same.
"""

from __future__ import annotations

import numpy as np
import pytest

import dpaudit

pytest.importorskip("opacus", reason="Opacus is an optional extra: pip install 'dpaudit[models]'")

from dpaudit.auditing.checks.zoo.dpsgd import mean_output, zero_linear  # noqa: E402
from dpaudit.mechanisms.adapters import from_opacus  # noqa: E402
from dpaudit.reports.text import markdown  # noqa: E402


def _cardinality(records: int, outputs: int = 200):
    return from_opacus(zero_linear(outputs), records=np.zeros((records, 1)), batch_size=4, noise_multiplier=1.0,
                       criterion=mean_output)


def test_removing_a_record_is_a_certified_violation_of_opacus_own_claim():
    training = _cardinality(12)
    result = dpaudit.audit(training, dataset_pair=training.neighbours(), trials=1_000, delta=1e-5, seed=0)
    (claim,) = [c for c in result.claims if c.name == "opacus-accountant"]
    assert claim.relation == "add-remove" and claim.epsilon == pytest.approx(4.582, abs=1e-3)
    assert result.canary["relation"] == "add-remove"
    assert result.verdict == "violation" and result.epsilon_lower_bound > claim.epsilon  # 5.49 measured, seed 0
    assert result.attack["score"] == "scale"  # the spread moves, not the mean
    conformance = result.conformance
    assert conformance["points_at"] == ["normalisation"] and conformance["claimed_epsilon"] == pytest.approx(4.582,
                                                                                                            abs=1e-3)
    assert "## Conformance" in markdown(result) and "normalisation" in markdown(result)


def test_the_same_training_on_11_against_10_records_is_not_flagged():
    training = _cardinality(11)
    result = dpaudit.audit(training, dataset_pair=training.neighbours(), trials=1_000, delta=1e-5, seed=0)
    assert result.verdict != "violation"
    # the assumption still fails for these records: adding one (12) would move the divisor to 4
    checks = {a["name"]: a for a in training.assumptions()}
    assert checks["sampling"]["holds"] and not checks["normalisation"]["holds"]
    assert "3 at n=10, 3 at n=11, 4 at n=12" in checks["normalisation"]["detail"]
    assert result.conformance["points_at"] == [] and "normalisation" in result.conformance["statement"]


def net():
    """A user's model factory (module level: worker processes import it by name)."""
    import torch

    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))


def test_a_users_own_model_loader_and_sampler_run_as_called():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    records = torch.utils.data.TensorDataset(torch.as_tensor(rng.normal(size=(10, 3)), dtype=torch.float32),
                                             torch.as_tensor(rng.normal(size=(10, 1)), dtype=torch.float32))
    training = from_opacus(net, records=records, input_columns=3, batch_size=5, noise_multiplier=1.0,
                           poisson_sampling=False, output="iterates", epochs=2)
    assert training.parameter_count == 21 and training.steps == 4 and training.output_dim == 84
    first = training.sample(trials=3, seed=5)
    np.testing.assert_array_equal(first, training.sample(trials=3, seed=5))  # every trial from its own seed
    assert not np.array_equal(first[0], first[1])
    sampling = {a["name"]: a for a in training.assumptions()}["sampling"]
    assert not sampling["holds"] and "shuffled fixed-size batches" in sampling["detail"]
    two = from_opacus(net, records=records, input_columns=3, batch_size=5, noise_multiplier=1.0,
                      poisson_sampling=False, output="iterates", epochs=2, workers=2)
    np.testing.assert_array_equal(two.sample(trials=4, seed=5), training.sample(trials=4, seed=5))


def test_bad_arguments_are_refused_with_the_parameter_named():
    with pytest.raises(dpaudit.ParameterError, match="give noise_multiplier .* or target_epsilon"):
        from_opacus(zero_linear(2), records=np.zeros((4, 1)), batch_size=2)
    with pytest.raises(dpaudit.ParameterError, match="model must be a torch.nn.Module"):
        from_opacus(3, records=np.zeros((4, 1)), batch_size=2, noise_multiplier=1.0)
    training = _cardinality(13, outputs=2)
    with pytest.raises(dpaudit.ParameterError, match="records of 1 columns"):
        training.sample(np.zeros((5, 2)), trials=2, seed=0)
    iterates = from_opacus(zero_linear(2), records=np.zeros((12, 1)), batch_size=4, noise_multiplier=1.0,
                           output="iterates")
    with pytest.raises(dpaudit.ParameterError, match="releases one iterate per step"):
        iterates.sample(np.zeros((13, 1)), trials=2, seed=0)  # 13 records run 4 steps, 12 run 3


def test_the_engine_is_asked_once_per_accountant_history_and_delta(monkeypatch):
    """Equal trainings share the engine's answers (they are a function of the accountant's history); another
    noise multiplier is another history, and every answer is the one the engine gives."""
    import opacus

    from dpaudit.mechanisms.adapters import opacus_run

    asked = []
    original = opacus.PrivacyEngine.get_epsilon

    def counted(engine, delta):
        asked.append(delta)
        return original(engine, delta)
    monkeypatch.setattr(opacus.PrivacyEngine, "get_epsilon", counted)
    monkeypatch.setattr(opacus_run, "_ENGINE_EPSILONS", {})

    def training(noise):
        return from_opacus(zero_linear(3), records=np.zeros((12, 1)), batch_size=4, noise_multiplier=noise,
                           criterion=mean_output, accountant="rdp")
    first = training(1.0)
    value = first.reported_epsilon(1e-5)
    engines, _ = first._reported
    assert value == max(float(original(engine, 1e-5)) for engine in engines)  # 3 sizes: n-1, n, n+1
    histories = {repr(engine.accountant.history) for engine in engines}
    assert len(histories) == 2 and len(asked) == 2  # 11 and 12 records: 3 batches each, one history
    asked.clear()
    assert training(1.0).reported_epsilon(1e-5) == value and asked == []  # the same histories: not asked again
    assert training(2.0).reported_epsilon(1e-5) < value and len(asked) == 2
