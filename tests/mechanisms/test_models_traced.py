"""Models with a forward pass of their own (mechanisms/models/grad_sample/traced.py): closed forms per layer
found from the modules they hold, checked against torch.func; the fallbacks, each with its reason."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import dpaudit
from dpaudit.mechanisms.models.grad_sample.plan import LayerPlan
from dpaudit.mechanisms.models.networks import Stacked, per_example_gradients
from dpaudit.mechanisms.models.training import Schedule, train
from tests.mechanisms.test_models_grad_sample import CASES, TOLERANCE, _problem, _torch_func_gradients

pytest.importorskip("sklearn", reason="the bundled datasets need the 'models' extra (scikit-learn)")


class DigitsCNN(nn.Module):
    """Issue 61's CNN as a user writes it: conv 1 -> 4 3x3, tanh, 2x2 average pooling, linear (690 parameters)."""

    def __init__(self, features: int, classes: int) -> None:
        super().__init__()
        self.side = int(round(features ** 0.5))
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.out = nn.Linear(4 * (self.side // 2) ** 2, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.avg_pool2d(torch.tanh(self.conv(x.reshape(-1, 1, self.side, self.side))), 2)
        return self.out(x.flatten(1))


class Wrapped(nn.Module):
    """A Sequential case behind a forward of its own (a container the walk of Sequentials does not enter);
    indices of an embedding are made integers there, as a user's forward does."""

    def __init__(self, body: nn.Module, integer: bool) -> None:
        super().__init__()
        self.body, self.integer = body, integer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x.long() if self.integer else x)


class Reused(nn.Module):
    """One layer called twice, one never: gradients summed over calls, zeros for the unused layer."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c, self.unused = nn.Linear(6, 5), nn.Linear(5, 5), nn.Linear(5, 3), nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(torch.tanh(self.b(torch.tanh(self.b(self.a(x))))))


class MixesExamples(nn.Module):
    """Centres the batch: an example's output depends on the others (not per-example)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x - x.mean(dim=0))


class UsesAWeightDirectly(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x) * self.layer.weight.sum()


class HoldsAParameter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer, self.scale = nn.Linear(6, 3), nn.Parameter(torch.linspace(0.5, 1.5, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x) * self.scale


class Scale(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, 5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight


class WithAnUnknownLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first, self.scale, self.last = nn.Linear(6, 5), Scale(), nn.Linear(5, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.last(torch.relu(self.scale(self.first(x))))


class FunctionalPools(nn.Module):
    """Pooling written as functions: overlapping windows (torch's kernel), tiled 2-D and 1-D windows (a product)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv, self.out = nn.Conv2d(2, 3, 3, padding=1), nn.Linear(9, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.avg_pool2d(torch.tanh(self.conv(x.reshape(-1, 2, 6, 6))), 3, stride=1, padding=1)
        x = F.avg_pool2d(x, kernel_size=2).flatten(1)  # (N, 27)
        return self.out(F.avg_pool1d(x.unsqueeze(1), 3)[:, 0])


def _stacked_problem(model: nn.Module, features: int, seed: int = 0):
    """Stacked parameters moved apart per trial (3 trials), 4 examples each, labels of 3 classes."""
    torch.manual_seed(seed)
    model = model.double()
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(3, 4, features, generator=generator, dtype=torch.float64)
    stacked = Stacked(model, examples=inputs[0])
    theta = stacked.flat.repeat(3, 1) + 0.3 * torch.randn(3, stacked.size, generator=generator, dtype=torch.float64)
    labels = torch.randint(0, 3, (3, 4), generator=generator).double()
    return model, stacked, theta, inputs, labels


def _assert_equals_torch_func(model, stacked, theta, inputs, labels, integer=False):
    expected = _torch_func_gradients(model, stacked, theta, inputs, labels, integer)
    torch.testing.assert_close(per_example_gradients(stacked, theta, inputs, labels), expected, **TOLERANCE)
    squared, weighted_sum = stacked.plan.clip_parts(stacked.unflatten, stacked.names, theta, inputs, labels)
    torch.testing.assert_close(squared, expected.square().sum(dim=-1), **TOLERANCE)
    weights = torch.linspace(0.1, 1.0, inputs.shape[0] * inputs.shape[1], dtype=torch.float64).reshape(
        inputs.shape[:2])
    torch.testing.assert_close(weighted_sum(weights), (weights.unsqueeze(-1) * expected).sum(dim=1), **TOLERANCE)


def test_the_issues_own_forward_cnn_takes_the_closed_forms_and_equals_torch_func_in_float64():
    mech = dpaudit.make("model", model=DigitsCNN, data="digits", steps=2, dtype="float64")
    assert mech.gradient_paths == ["conv Conv2d: closed form", "out Linear: closed form",
                                   "F.avg_pool2d: parameter-free (a product)"]
    stacked = mech._stacked()
    generator = torch.Generator().manual_seed(4)
    picks = torch.randint(0, mech.n_records, (3, 5), generator=generator)
    records = torch.as_tensor(np.array(mech.records))
    inputs, labels = records[picks, :-1], records[picks, -1]
    theta = stacked.flat.repeat(3, 1) + 0.2 * torch.randn(3, stacked.size, generator=generator, dtype=torch.float64)
    _assert_equals_torch_func(stacked.model, stacked, theta, inputs, labels)


@pytest.mark.parametrize("case", [c for c in CASES if c != "own-forward"])
def test_every_sequential_case_behind_a_forward_of_its_own_equals_torch_func(case):
    model, _, theta, inputs, labels, vocabulary = _problem(case)
    wrapped = Wrapped(model, vocabulary is not None)
    stacked = Stacked(wrapped, examples=inputs[0])
    assert type(stacked.plan).__name__ == "ModulePlan", stacked.plan.describe()
    _assert_equals_torch_func(wrapped, stacked, theta, inputs, labels, vocabulary is not None)


def test_a_layer_called_twice_sums_its_calls_and_an_unused_layer_has_zero_gradients():
    model, stacked, theta, inputs, labels = _stacked_problem(Reused(), 6)
    assert stacked.plan.describe() == [
        "a Linear: closed form", "b Linear: closed form (called 2 times a forward pass: per-example gradients formed)",
        "c Linear: closed form", "unused Linear: closed form (never called)"]
    _assert_equals_torch_func(model, stacked, theta, inputs, labels)


def test_a_layer_of_unknown_kind_takes_torch_func_alone_and_says_so():
    model, stacked, theta, inputs, labels = _stacked_problem(WithAnUnknownLayer(), 6)
    assert stacked.plan.describe() == ["first Linear: closed form", "scale Scale: torch.func (no closed form for "
                                       "Scale)", "last Linear: closed form"]
    _assert_equals_torch_func(model, stacked, theta, inputs, labels)


def test_pooling_functions_of_tiled_small_planes_are_products_and_equal_torch_func():
    model, stacked, theta, inputs, labels = _stacked_problem(FunctionalPools(), 72)
    assert stacked.plan.describe() == ["conv Conv2d: closed form", "out Linear: closed form",
                                       "F.avg_pool1d: parameter-free (a product)",
                                       "F.avg_pool2d: parameter-free (a product)"]
    _assert_equals_torch_func(model, stacked, theta, inputs, labels)


@pytest.mark.parametrize("model, reason", [
    (MixesExamples, "MixesExamples: its layers' per-example gradients differ from torch.func's"),
    (UsesAWeightDirectly, "UsesAWeightDirectly: its layers cannot be run with every trial's parameters"),
    (HoldsAParameter, "HoldsAParameter holds parameters of its own, not only in layers")])
def test_a_forward_pass_the_layers_cannot_follow_goes_through_torch_func_as_a_whole(model, reason):
    model, stacked, theta, inputs, labels = _stacked_problem(model(), 6)
    assert not stacked.plan.layered
    (line,) = stacked.plan.describe()
    assert line.startswith(f"whole model: torch.func ({reason}"), line


def test_dp_sgd_on_a_traced_model_equals_dp_sgd_through_torch_func():
    # the same seeds draw the same batches and noise: the two paths differ by rounding only
    model = DigitsCNN(36, 3).double()
    records = torch.cat([torch.randn(40, 36, generator=torch.Generator().manual_seed(1), dtype=torch.float64),
                         (torch.arange(40) % 3).double().unsqueeze(1)], dim=1)
    canary = {5: torch.full((Stacked(model).size,), 0.01, dtype=torch.float64)}
    results = []
    for traced in (True, False):
        stacked = Stacked(model, examples=records[:4, :-1])
        if traced:
            assert type(stacked.plan).__name__ == "ModulePlan"
        else:
            stacked.plan = LayerPlan(None, "the reference")
        for sampling in ("poisson", "shuffle"):
            schedule = Schedule(4, 8, sampling, 0.5, 1.0, 0.5, 0.0)
            results.append(train(stacked, records, canary, schedule, 5, np.random.default_rng(3)))
    for traced, generic in zip(results[:2], results[2:]):
        torch.testing.assert_close(traced, generic, rtol=1e-10, atol=1e-10)


def test_a_float32_training_of_a_traced_model_has_the_law_of_the_float64_training():
    # float32 trainings draw their noise from NumPy's float32 ziggurat, float64 ones from the float64 one
    # (training.standard_normal). The never-called layer's 6 parameters move by noise alone, N(start,
    # steps (eta sigma C / m)^2) exactly: a one-sample KS test per dtype on 800 x 6 standardised moves; the
    # trained coordinates must follow one law in both dtypes: two-sample KS on three. KS p-values under the
    # null are uniform: 1e-3 per test.
    from scipy.stats import ks_2samp, kstest

    mech = dpaudit.make("model", model="mlp", data="iris", steps=2)  # only for its records
    records = torch.as_tensor(np.array(mech.records))[:, [0, 1, 2, 3, 0, 1, 4]]  # 6 features, then the label
    steps, batch, clip, sigma, eta = 6, 30, 1.0, 1.0, 0.5
    schedule = Schedule(steps, batch, "poisson", clip, sigma, eta, 0.0)
    trained, threads = [], torch.get_num_threads()
    torch.set_num_threads(1)  # as Mechanism.sample does: small products gain nothing from a second thread
    try:
        for dtype, seed in ((torch.float64, 1), (torch.float32, 2)):
            torch.manual_seed(0)
            stacked = Stacked(Reused().to(dtype), examples=records[:4, :-1].to(dtype))
            assert type(stacked.plan).__name__ == "ModulePlan"
            final = train(stacked, records.to(dtype), {}, schedule, 800, np.random.default_rng(seed)).double()
            moves = (final - stacked.flat.double())[:, -6:] / (eta * sigma * clip / batch * steps ** 0.5)
            assert kstest(moves.reshape(-1).numpy(), "norm").pvalue > 1e-3, dtype
            trained.append(final)
    finally:
        torch.set_num_threads(threads)
    for column in (0, trained[0].shape[1] // 3, trained[0].shape[1] // 2):
        assert ks_2samp(trained[0][:, column].numpy(), trained[1][:, column].numpy()).pvalue > 1e-3, column
