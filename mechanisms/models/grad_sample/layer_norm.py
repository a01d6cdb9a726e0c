"""``nn.LayerNorm``: the affine parameters' per-example gradients from the normalised input.

With ``x_hat`` the input normalised over the layer's last dimensions, the
output is ``gamma * x_hat + beta``: an example's gradients are
``sum b * x_hat`` and ``sum b`` over the positions before those dimensions.
The parameters are few, so the gradients are formed (no ghost norms needed).

References
----------
Ba et al. 2016, "Layer normalization"; Opacus, ``opacus/grad_sample/layer_norm.py``.
"""

from __future__ import annotations

import torch
from torch import nn

from dpaudit.mechanisms.models.grad_sample.registry import LayerRule, register_rule

__all__ = ["LayerNormRule"]


def _broadcast(parameter: torch.Tensor, dims: int) -> torch.Tensor:
    """``(T, *shape)`` -> ``(T, 1, ..., 1, *shape)`` with ``dims`` ones (examples and positions)."""
    return parameter.reshape(parameter.shape[0], *([1] * dims), *parameter.shape[1:])


@register_rule(nn.LayerNorm)
class LayerNormRule(LayerRule):
    """Layer normalisation (with or without the affine parameters; without them it has none to train)."""

    def forward(self, layer, params, x):
        normalised = torch.nn.functional.layer_norm(x, layer.normalized_shape, eps=layer.eps)
        leading = x.dim() - 1 - len(layer.normalized_shape)  # example axis and positions
        out = normalised
        if "weight" in params:
            out = out * _broadcast(params["weight"], leading)
        if "bias" in params:
            out = out + _broadcast(params["bias"], leading)
        return out, normalised

    def gradients(self, layer, saved, backprops):
        normalised = saved
        positions = tuple(range(2, backprops.dim() - len(layer.normalized_shape)))
        result = {}
        if layer.weight is not None:
            result["weight"] = (backprops * normalised).sum(dim=positions) if positions else backprops * normalised
        if layer.bias is not None:
            result["bias"] = backprops.sum(dim=positions) if positions else backprops
        return result
