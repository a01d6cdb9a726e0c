"""Models on a GPU (skipped without one), the device and dtype defaults, training progress bars."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import ks_2samp
from torch import nn

import dpaudit
from dpaudit.mechanisms.models import progress
from dpaudit.mechanisms.models.networks import Stacked, per_example_gradients

pytest.importorskip("sklearn", reason="the bundled datasets need the 'models' extra (scikit-learn)")
needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU here: the CUDA path is checked on "
                                                                     "machines that have one")


def small_cnn(features: int, classes: int) -> nn.Module:
    side = int(round(features ** 0.5))
    return nn.Sequential(nn.Unflatten(1, (1, side, side)), nn.Conv2d(1, 2, 3, padding=1), nn.ReLU(),
                         nn.AvgPool2d(2), nn.Flatten(), nn.Linear(2 * (side // 2) ** 2, classes))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the fallback to the CPU where torch sees no GPU")
def test_auto_device_without_a_gpu_is_the_cpu_in_float64():
    mech = dpaudit.make("model", device="auto", steps=2)
    assert mech.device == "cpu" and mech.dtype == "float64" and mech.params["device"] == "cpu"


def test_the_mechanism_says_which_path_each_layer_takes():
    mech = dpaudit.make("model", model=small_cnn, data="digits", steps=2)
    assert mech.gradient_paths[1] == "1 Conv2d: closed form"
    assert dpaudit.make("model", steps=2).gradient_paths == ["Linear: closed form (linear model)"]


def test_training_bars_follow_the_switch(monkeypatch, capsys):
    monkeypatch.setattr(progress, "DELAY", 0.0)
    mech = dpaudit.make("model", model="mlp", data="iris", steps=3, batch_size=16)
    with progress.training_progress(False):
        mech.sample(trials=8, seed=0)
    assert "training" not in capsys.readouterr().err
    with progress.training_progress(True):
        mech.sample(trials=8, seed=0)
    assert "training 8 models" in capsys.readouterr().err


def test_training_progress_restores_the_environment(monkeypatch):
    monkeypatch.delenv("DPAUDIT_PROGRESS", raising=False)
    with progress.training_progress(True):
        assert progress.enabled()
    with progress.training_progress(False):
        assert not progress.enabled()
    assert "DPAUDIT_PROGRESS" not in __import__("os").environ


@needs_gpu
def test_auto_device_with_a_gpu_is_cuda_in_float32():
    mech = dpaudit.make("model", device="auto", steps=2)
    assert mech.device == "cuda" and mech.dtype == "float32"


@needs_gpu
@pytest.mark.parametrize("model", ["logistic", "mlp", small_cnn])
def test_gpu_results_are_reproducible_from_the_seed(model):
    data = "digits" if model is small_cnn else "breast_cancer"
    mech = dpaudit.make("model", model=model, data=data, steps=5, device="cuda", dtype="float64")
    np.testing.assert_array_equal(mech.sample(trials=300, seed=3), mech.sample(trials=300, seed=3))


@needs_gpu
@pytest.mark.parametrize("model, sampling", [("logistic", "poisson"), ("softmax", "without-replacement"),
                                             ("mlp", "poisson"), ("mlp", "shuffle")])
def test_gpu_and_cpu_trainings_have_one_law(model, sampling):
    # independent samples of the same law on two devices: the KS p-value is uniform, 1e-3 fails 1 run in 1000
    # per coordinate; three coordinates are checked (a Bonferroni level of 3e-3 for the test)
    data, batch = ("breast_cancer", 64) if model == "logistic" else ("iris", 30)
    params = dict(model=model, data=data, steps=10, batch_size=batch, sampling=sampling, dtype="float64")
    cpu = dpaudit.make("model", **params).sample(trials=4000, seed=1)
    gpu = dpaudit.make("model", device="cuda", **params).sample(trials=4000, seed=2)
    for column in (0, cpu.shape[1] // 2, cpu.shape[1] - 1):
        assert ks_2samp(cpu[:, column], gpu[:, column]).pvalue > 1e-3, column


@needs_gpu
def test_gpu_per_example_gradients_equal_torch_func():
    torch.manual_seed(0)
    stacked = Stacked(small_cnn(16, 3).double(), device="cuda")
    generator = torch.Generator(device="cuda").manual_seed(0)
    theta = stacked.flat.repeat(3, 1) + 0.3 * torch.randn(3, stacked.size, generator=generator, device="cuda",
                                                          dtype=torch.float64)
    inputs = torch.randn(3, 5, 16, generator=generator, device="cuda", dtype=torch.float64)
    labels = torch.randint(0, 3, (3, 5), generator=generator, device="cuda").double()
    torch.testing.assert_close(per_example_gradients(stacked, theta, inputs, labels),
                               per_example_gradients(stacked, theta, inputs, labels, closed_form=False),
                               rtol=1e-6, atol=1e-6)


@needs_gpu
def test_a_gpu_batch_larger_than_the_gather_trains_again_with_room_for_every_record(monkeypatch):
    # a gather of width 1 overflows at once: the block must be trained again uncapped, from the same seed,
    # giving the same trainings (up to rounding: the gathers have other widths)
    from dpaudit.mechanisms.models import device

    mech = dpaudit.make("model", model="mlp", data="iris", steps=4, batch_size=16, device="cuda", dtype="float64")
    expected = mech.sample(trials=50, seed=5)
    monkeypatch.setattr(device, "gather_width", lambda schedule, n: 1)
    np.testing.assert_allclose(mech.sample(trials=50, seed=5), expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("model, sampling, injected", [("logistic", "poisson", False), ("softmax", "shuffle", True),
                                                       ("mlp", "poisson", True), ("mlp", "without-replacement", False)])
def test_the_device_path_run_on_the_cpu_has_the_law_of_the_cpu_path(monkeypatch, model, sampling, injected):
    # The device path's arithmetic does not need a GPU: run it on CPU tensors (blocks sized by hand) and
    # compare its law with the CPU path's. KS p-values of independent samples of one law are uniform:
    # 1e-3 per coordinate, two coordinates.
    from dpaudit.mechanisms.models import device, training

    monkeypatch.setattr(device, "device_block", lambda trials, *args: 64)
    data, batch = ("breast_cancer", 64) if model == "logistic" else ("iris", 30)  # the MLP takes the layered path
    mech = dpaudit.make("model", model=model, data=data, steps=6, batch_size=batch, sampling=sampling)
    stacked = Stacked(mech._template)
    records = torch.as_tensor(np.array(mech.records))
    canary = {3: torch.full((stacked.size,), 0.5 / stacked.size ** 0.5, dtype=torch.float64)} if injected else {}
    schedule = training.Schedule(6, batch, sampling, 1.0, 1.0, 0.5, 0.0)
    packed = training.Injected(canary, records.shape[0], stacked.size, torch.float64)
    on_device = device.train_on_device(stacked, records, packed, schedule, 400, np.random.default_rng(1))
    again = device.train_on_device(stacked, records, packed, schedule, 400, np.random.default_rng(1))
    torch.testing.assert_close(on_device, again, rtol=0, atol=0)  # reproducible from the seed
    on_cpu = training.train(stacked, records, canary, schedule, 400, np.random.default_rng(2))
    for column in (0, stacked.size - 1):
        assert ks_2samp(on_device[:, column].numpy(), on_cpu[:, column].numpy()).pvalue > 1e-3, column
