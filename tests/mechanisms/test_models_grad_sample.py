"""Per-example gradients layer by layer (mechanisms/models/grad_sample) against torch.func, batched over trials."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from dpaudit.mechanisms.models.grad_sample import plan_layers, register_rule
from dpaudit.mechanisms.models.grad_sample.plan import LayerPlan
from dpaudit.mechanisms.models.grad_sample.registry import LayerRule
from dpaudit.mechanisms.models.networks import Stacked
from dpaudit.mechanisms.models.training import Schedule, train

TRIALS, EXAMPLES = 3, 4
# float64 throughout: the closed forms and torch.func differ by rounding only (about 1e-15 here)
TOLERANCE = dict(rtol=1e-6, atol=1e-6)


class Scale(nn.Module):
    """A layer no rule knows: the plan must take torch.func for it."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.linspace(0.5, 1.5, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x * self.weight)


class OwnForward(nn.Module):
    """A model whose forward pass is its own code (not a sequence of layers)."""

    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = nn.Linear(6, 5), nn.Linear(5, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.relu(self.first(x))) + x[..., :3]


# name -> (model, features per example, integer inputs below this many values or None)
CASES = {
    "linear": (lambda: nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3)), 6, None),
    "linear-no-bias": (lambda: nn.Sequential(nn.Linear(6, 5, bias=False), nn.ReLU(), nn.Linear(5, 3)), 6, None),
    "linear-positions": (lambda: nn.Sequential(nn.Unflatten(1, (4, 3)), nn.Linear(3, 2), nn.Flatten(),
                                               nn.Linear(8, 3)), 12, None),
    "linear-positions-formed": (lambda: nn.Sequential(nn.Unflatten(1, (6, 2)), nn.Linear(2, 2), nn.Flatten(),
                                                      nn.Linear(12, 3)), 12, None),
    "conv2d": (lambda: nn.Sequential(nn.Unflatten(1, (1, 6, 6)), nn.Conv2d(1, 3, 3, padding=1), nn.ReLU(),
                                     nn.AvgPool2d(2), nn.Flatten(), nn.Linear(27, 3)), 36, None),
    "conv2d-ghost": (lambda: nn.Sequential(nn.Unflatten(1, (2, 4, 4)), nn.Conv2d(2, 8, 3, bias=False), nn.GELU(),
                                           nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8, 3)), 32, None),
    "conv2d-strided": (lambda: nn.Sequential(nn.Unflatten(1, (2, 7, 7)), nn.Conv2d(2, 3, (3, 2), stride=2,
                                                                                    dilation=(1, 2), padding=(1, 0)),
                                             nn.SiLU(), nn.Flatten(), nn.Linear(36, 3)), 98, None),
    "conv1d": (lambda: nn.Sequential(nn.Unflatten(1, (2, 8)), nn.Conv1d(2, 3, 3, stride=2), nn.ELU(),
                                     nn.AdaptiveAvgPool1d(2), nn.Flatten(), nn.Linear(6, 3)), 16, None),
    "conv1d-same": (lambda: nn.Sequential(nn.Unflatten(1, (2, 8)), nn.Conv1d(2, 3, 5, padding="same"),
                                          nn.Softplus(), nn.Flatten(), nn.Linear(24, 3)), 16, None),
    # average pooling by a product on tiled small planes (rows and columns past the last window dropped), else
    # torch's kernel (overlapping or padded windows)
    "avg-pool-tiled": (lambda: nn.Sequential(nn.Unflatten(1, (2, 7, 7)), nn.Conv2d(2, 3, 3, padding=1), nn.Tanh(),
                                             nn.AvgPool2d((2, 3), divisor_override=5), nn.Flatten(),
                                             nn.Linear(18, 3)), 98, None),
    "avg-pool-1d": (lambda: nn.Sequential(nn.Unflatten(1, (2, 9)), nn.Conv1d(2, 2, 2), nn.AvgPool1d(3),
                                          nn.Flatten(), nn.Linear(4, 3)), 18, None),
    "avg-pool-overlapping": (lambda: nn.Sequential(nn.Unflatten(1, (1, 5, 5)), nn.Conv2d(1, 2, 3, padding=1),
                                                   nn.AvgPool2d(3, stride=1, padding=1), nn.Flatten(),
                                                   nn.Linear(50, 3)), 25, None),
    "embedding": (lambda: nn.Sequential(nn.Embedding(7, 3, padding_idx=0), nn.Flatten(), nn.Linear(15, 3)), 5, 7),
    "embedding-ghost": (lambda: nn.Sequential(nn.Embedding(50, 4), nn.Flatten(), nn.Linear(8, 3)), 2, 50),
    "layer-norm": (lambda: nn.Sequential(nn.Linear(6, 5), nn.LayerNorm(5), nn.Linear(5, 3)), 6, None),
    "layer-norm-positions": (lambda: nn.Sequential(nn.Unflatten(1, (3, 4)), nn.LayerNorm(4), nn.Flatten(),
                                                   nn.Linear(12, 3)), 12, None),
    "group-norm": (lambda: nn.Sequential(nn.Unflatten(1, (4, 3, 2)), nn.GroupNorm(2, 4), nn.Flatten(),
                                         nn.Linear(24, 3)), 24, None),
    "binary": (lambda: nn.Sequential(nn.Linear(6, 4), nn.Sigmoid(), nn.Linear(4, 1)), 6, None),
    "fallback-layer": (lambda: nn.Sequential(nn.Linear(6, 5), Scale(5), nn.Linear(5, 3)), 6, None),
    "fallback-groups": (lambda: nn.Sequential(nn.Unflatten(1, (2, 8)), nn.Conv1d(2, 4, 3, groups=2), nn.Flatten(),
                                              nn.Linear(24, 3)), 16, None),
    "own-forward": (OwnForward, 6, None),
}


def _problem(case: str, seed: int = 0):
    """A model, its stacked parameters moved apart per trial, inputs and labels ``(TRIALS, EXAMPLES)``."""
    factory, features, vocabulary = CASES[case]
    torch.manual_seed(seed)
    model = factory().double()
    stacked = Stacked(model)
    generator = torch.Generator().manual_seed(seed)
    theta = stacked.flat.repeat(TRIALS, 1) + 0.3 * torch.randn(TRIALS, stacked.size, generator=generator,
                                                               dtype=torch.float64)
    if vocabulary:
        inputs = torch.randint(0, vocabulary, (TRIALS, EXAMPLES, features), generator=generator).double()
        inputs[0, 0, 1] = inputs[0, 0, 0]  # an index used twice by one example
    else:
        inputs = torch.randn(TRIALS, EXAMPLES, features, generator=generator, dtype=torch.float64)
    classes = 2 if case == "binary" else 3
    labels = torch.randint(0, classes, (TRIALS, EXAMPLES), generator=generator).double()
    return model, stacked, theta, inputs, labels, vocabulary


def _torch_func_gradients(model, stacked, theta, inputs, labels, integer: bool) -> torch.Tensor:
    """The reference: vmap over trials of vmap over examples of grad of functional_call, flattened in order."""
    def loss(params, x, y):
        output = functional_call(model, params, ((x.long() if integer else x).unsqueeze(0),))[0]
        if output.shape[-1] == 1:
            return nn.functional.binary_cross_entropy_with_logits(output[0], y)
        return nn.functional.cross_entropy(output, y.long())

    params = stacked.unflatten(theta)
    gradients = vmap(vmap(grad(loss), in_dims=(None, 0, 0)), in_dims=(0, 0, 0))(params, inputs, labels)
    return torch.cat([gradients[name].flatten(start_dim=2) for name in stacked.names], dim=-1)


@pytest.mark.parametrize("case", [c for c in CASES if c != "own-forward"])
def test_per_example_gradients_and_clipped_sums_equal_torch_func(case):
    model, stacked, theta, inputs, labels, vocabulary = _problem(case)
    assert stacked.plan.layered
    expected = _torch_func_gradients(model, stacked, theta, inputs, labels, vocabulary is not None)
    found = stacked.plan.per_example_gradients(stacked.unflatten, stacked.names, theta, inputs, labels)
    torch.testing.assert_close(found, expected, **TOLERANCE)
    squared, weighted_sum = stacked.plan.clip_parts(stacked.unflatten, stacked.names, theta, inputs, labels)
    torch.testing.assert_close(squared, expected.square().sum(dim=-1), **TOLERANCE)
    norms = torch.linalg.vector_norm(expected, dim=-1)
    clip = float(norms.median())  # some examples clipped, some not
    weights = torch.clamp(clip / norms, max=1.0) * torch.tensor([1.0, 0.0, 1.0, 1.0], dtype=torch.float64)
    torch.testing.assert_close(weighted_sum(weights), (weights.unsqueeze(-1) * expected).sum(dim=1), **TOLERANCE)


def test_the_plan_names_each_layers_path():
    paths = Stacked(CASES["conv2d"][0]().double()).plan.describe()
    assert paths[1] == "1 Conv2d: closed form" and paths[2] == "2 ReLU: parameter-free"
    assert Stacked(CASES["conv2d-ghost"][0]().double()).plan.describe()[1] == "1 Conv2d: closed form"


@pytest.mark.parametrize("case, reason", [("fallback-layer", "1 Scale: torch.func (no closed form for Scale)"),
                                          ("fallback-groups", "1 Conv1d: torch.func (Conv1d with groups=2")])
def test_a_layer_without_a_rule_falls_back_to_torch_func_and_says_so(case, reason):
    _, stacked, *_ = _problem(case)
    assert any(line.startswith(reason) for line in stacked.plan.describe()), stacked.plan.describe()


def test_a_model_with_its_own_forward_and_no_records_to_check_on_goes_through_torch_func_as_a_whole():
    model, stacked, theta, inputs, labels, _ = _problem("own-forward")
    assert not stacked.plan.layered
    assert stacked.plan.describe() == ["whole model: torch.func (OwnForward has a forward pass of its own and no "
                                       "records were given to check its layers on)"]
    from dpaudit.mechanisms.models.networks import per_example_gradients

    torch.testing.assert_close(per_example_gradients(stacked, theta, inputs, labels),
                               _torch_func_gradients(model, stacked, theta, inputs, labels, False), **TOLERANCE)


def test_shared_parameters_are_not_a_plain_sequence():
    shared = nn.Linear(4, 4)
    plan = Stacked(nn.Sequential(shared, nn.Tanh(), shared).double()).plan
    assert not plan.layered and "share" in plan.reason


def test_the_registry_refuses_a_second_rule_for_a_layer_type():
    with pytest.raises(ValueError, match="Linear already has the rule LinearRule"):
        register_rule(nn.Linear)(type("AnotherLinear", (LayerRule,), {}))


def test_dp_sgd_on_layers_equals_dp_sgd_through_torch_func():
    # the same seeds draw the same batches and noise: the two paths differ by rounding only
    model = CASES["conv2d"][0]().double()
    records = torch.cat([torch.randn(40, 36, generator=torch.Generator().manual_seed(1), dtype=torch.float64),
                         (torch.arange(40) % 3).double().unsqueeze(1)], dim=1)
    canary = {5: torch.full((Stacked(model).size,), 0.01, dtype=torch.float64)}
    results = []
    for layered in (True, False):
        stacked = Stacked(model)
        if not layered:
            stacked.plan = LayerPlan(None, "the reference")
        for sampling in ("poisson", "shuffle"):
            schedule = Schedule(4, 8, sampling, 0.5, 1.0, 0.5, 0.0)
            results.append(train(stacked, records, canary, schedule, 5, np.random.default_rng(3)))
    for layered, generic in zip(results[:2], results[2:]):
        torch.testing.assert_close(layered, generic, rtol=1e-10, atol=1e-10)


def test_plan_of_a_single_layer_model():
    plan = plan_layers(nn.Linear(3, 2), ["weight", "bias"])
    assert plan.layered and plan.describe() == ["0 Linear: closed form"]


@pytest.mark.parametrize("layer, plane, product", [
    (nn.AvgPool2d((2, 3), divisor_override=5), (7, 7), True),  # rows and columns past the last window dropped
    (nn.AvgPool1d(3), (8,), True),
    (nn.AvgPool2d(3, stride=1, padding=1), (5, 5), False),  # overlapping, padded windows: torch's kernel
    (nn.AvgPool2d(2, ceil_mode=True), (5, 5), False),
    (nn.AvgPool2d(2), (20, 20), False)])  # 100 windows: more than MAX_WINDOWS, torch's kernel
def test_average_pooling_of_small_tiled_planes_is_a_product_equal_to_torchs_kernel(layer, plane, product):
    from dpaudit.mechanisms.models.grad_sample.pooling import _tiles
    from dpaudit.mechanisms.models.grad_sample.registry import RULES

    rule = RULES[type(layer)]
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 2, *plane, generator=generator, dtype=torch.float64, requires_grad=True)
    assert (_tiles(layer, x.shape) is not None) == product
    out, _ = rule.forward(layer, {}, x)
    expected = layer(x.reshape(6, 2, *plane))
    torch.testing.assert_close(out, expected.reshape(out.shape), rtol=1e-12, atol=1e-12)
    weights = torch.randn(out.shape, generator=generator, dtype=torch.float64)
    (found,) = torch.autograd.grad((out * weights).sum(), x)
    (reference,) = torch.autograd.grad((expected * weights.reshape(expected.shape)).sum(), x)
    torch.testing.assert_close(found, reference, rtol=1e-12, atol=1e-12)
