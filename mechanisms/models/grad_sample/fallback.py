"""The fallback for a layer without a rule: its forward pass and per-example gradients by ``torch.func``.

The layer is called on one example at a time under ``vmap`` over examples
and over trials (each trial with its own parameters); the per-example
gradient of a parameterised layer is the gradient of that call's output
times the example's output gradient (a vector-Jacobian product), under the same two ``vmap`` s.
Correct for any layer that maps each example on its own, but slower than a
closed form: the plan records which layers took this path.

References
----------
PyTorch, ``torch.func`` (``vmap``, ``grad``, ``functional_call``).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from dpaudit.mechanisms.models.grad_sample.registry import LayerRule

__all__ = ["FunctionalRule"]


class FunctionalRule(LayerRule):
    """``torch.func`` for one layer (not registered: the plan uses it where no rule applies)."""

    def __init__(self, layer: nn.Module, device: torch.device | str = "cpu") -> None:
        self.buffers = {name: value.to(device) for name, value in layer.named_buffers()}
        self.has_parameters = any(True for _ in layer.parameters())

    def _call(self, layer: nn.Module):
        def one(params: dict[str, torch.Tensor], example: torch.Tensor) -> torch.Tensor:
            return functional_call(layer, (params, self.buffers), (example.unsqueeze(0),))[0]

        return one

    def forward(self, layer, params, x):
        one = self._call(layer)
        return vmap(vmap(one, in_dims=(None, 0)), in_dims=(0, 0))(params, x), (params, x)

    def gradients(self, layer, saved, backprops):
        params, inputs = saved
        one = self._call(layer)
        params = {name: value.detach() for name, value in params.items()}

        def pullback(trial_params, example, output_gradient):
            return grad(lambda p: (one(p, example) * output_gradient).sum())(trial_params)

        return vmap(vmap(pullback, in_dims=(None, 0, 0)), in_dims=(0, 0, 0))(params, inputs.detach(), backprops)
