"""``nn.GroupNorm``: the per-channel affine parameters' per-example gradients from the normalised input.

With ``x_hat`` the input normalised within each group of channels, the
output is ``gamma_c x_hat + beta_c``: an example's gradients are the sums
of ``b x_hat`` and of ``b`` over each channel's positions.

References
----------
Wu and He 2018, "Group normalization"; Opacus, ``opacus/grad_sample/group_norm.py``.
"""

from __future__ import annotations

import torch
from torch import nn

from dpaudit.mechanisms.models.grad_sample.registry import LayerRule, register_rule

__all__ = ["GroupNormRule"]


@register_rule(nn.GroupNorm)
class GroupNormRule(LayerRule):
    """Group normalisation of ``(channels, ...)`` inputs."""

    def forward(self, layer, params, x):
        trials, batch = x.shape[:2]
        merged = x.reshape(trials * batch, *x.shape[2:])
        normalised = torch.nn.functional.group_norm(merged, layer.num_groups, eps=layer.eps).reshape(x.shape)
        out = normalised
        shape = (trials, 1, x.shape[2]) + (1,) * (x.dim() - 3)
        if "weight" in params:
            out = out * params["weight"].reshape(shape)
        if "bias" in params:
            out = out + params["bias"].reshape(shape)
        return out, normalised

    def gradients(self, layer, saved, backprops):
        normalised = saved
        positions = tuple(range(3, backprops.dim()))
        result = {}
        if layer.weight is not None:
            result["weight"] = (backprops * normalised).sum(dim=positions) if positions else backprops * normalised
        if layer.bias is not None:
            result["bias"] = backprops.sum(dim=positions) if positions else backprops
        return result
