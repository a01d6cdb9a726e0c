"""``nn.Linear``: per-example gradients ``b a^T`` and ghost norms ``|a| |b|``, batched over trials.

For an input ``a`` of one example and the gradient ``b`` of its output, the
weight's gradient is ``b a^T`` (summed over any sequence positions) and the
bias's is ``b``. Without sequence positions its norm is ``|b| |a|``, so the
clipped sum needs only the norms and one weighted product per trial
(ghost clipping); with ``L`` positions the norm comes from two ``L x L`` Gram
matrices when that is cheaper than forming the gradient.

References
----------
Goodfellow 2015, "Efficient per-example gradient computations"; Li et al. 2022,
"Large language models can be strong differentially private learners", sec. 4
(ghost clipping); see docs/design.md.
"""

from __future__ import annotations

import torch
from torch import nn

from dpaudit.mechanisms.models.grad_sample.registry import ClipParts, LayerRule, register_rule

__all__ = ["LinearRule"]


@register_rule(nn.Linear)
class LinearRule(LayerRule):
    """Linear layers (any number of positions between the example axis and the features)."""

    def forward(self, layer, params, x):
        weight, bias = params["weight"], params.get("bias")  # (T, O, I), (T, O)
        trials, batch = x.shape[:2]
        flat = x.reshape(trials, -1, x.shape[-1])  # (T, B L, I)
        if bias is None:
            out = torch.bmm(flat, weight.transpose(1, 2))
        else:
            out = torch.baddbmm(bias.unsqueeze(1), flat, weight.transpose(1, 2))
        return out.reshape(*x.shape[:-1], weight.shape[1]), flat.reshape(trials, batch, -1, x.shape[-1])

    def gradients(self, layer, saved, backprops):
        inputs = saved  # (T, B, L, I)
        outputs = backprops.reshape(*inputs.shape[:3], -1)  # (T, B, L, O)
        result = {"weight": torch.einsum("tblo,tbli->tboi", outputs, inputs)}
        if layer.bias is not None:
            result["bias"] = outputs.sum(dim=2)
        return result

    def clip_parts(self, layer, saved, backprops):
        inputs = saved  # (T, B, L, I)
        trials, batch, positions, width = inputs.shape
        outputs = backprops.reshape(trials, batch, positions, -1)  # (T, B, L, O)
        if positions * positions > width * outputs.shape[-1]:  # a gradient is smaller than the Gram matrices
            return ClipParts.from_gradients(self.gradients(layer, saved, backprops))
        if positions == 1:
            squared = outputs[:, :, 0].square().sum(dim=-1) * inputs[:, :, 0].square().sum(dim=-1)
        else:  # |sum_l b_l a_l^T|^2 = sum_{l, l'} (a_l . a_l') (b_l . b_l')
            squared = (inputs @ inputs.transpose(-1, -2) * (outputs @ outputs.transpose(-1, -2))).sum(dim=(-1, -2))
        if layer.bias is not None:
            summed = outputs.sum(dim=2)
            squared = squared + summed.square().sum(dim=-1)

        def weighted_sum(weights: torch.Tensor) -> dict[str, torch.Tensor]:
            scaled = outputs * weights[:, :, None, None]
            result = {"weight": torch.bmm(scaled.reshape(trials, -1, scaled.shape[-1]).transpose(1, 2),
                                          inputs.reshape(trials, -1, width))}
            if layer.bias is not None:
                result["bias"] = scaled.sum(dim=(1, 2))
            return result

        return ClipParts("ghost", squared, weighted_sum)
