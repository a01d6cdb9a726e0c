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
        if positions == 1:  # |b a^T|^2 = |b|^2 |a|^2 (vector_norm: one pass over each, faster than square().sum())
            squared = (torch.linalg.vector_norm(outputs[:, :, 0], dim=-1)
                       * torch.linalg.vector_norm(inputs[:, :, 0], dim=-1)).square()
        else:  # |sum_l b_l a_l^T|^2 = sum_{l, l'} (a_l . a_l') (b_l . b_l')
            squared = (inputs @ inputs.transpose(-1, -2) * (outputs @ outputs.transpose(-1, -2))).sum(dim=(-1, -2))
        if layer.bias is not None:
            summed = outputs.sum(dim=2) if positions > 1 else outputs[:, :, 0]
            squared = squared + torch.linalg.vector_norm(summed, dim=-1).square()

        def weighted_sum(weights: torch.Tensor) -> dict[str, torch.Tensor]:
            # the weights scale the narrower side of the product: sum_b w_b b_b a_b^T
            rows = outputs.reshape(trials, -1, outputs.shape[-1])  # (T, B L, O)
            columns = inputs.reshape(trials, -1, width)  # (T, B L, I)
            per_row = weights.repeat_interleave(positions, dim=1) if positions > 1 else weights  # (T, B L)
            if rows.shape[-1] <= width:
                result = {"weight": torch.bmm((rows * per_row.unsqueeze(-1)).transpose(1, 2), columns)}
            else:
                result = {"weight": torch.bmm(rows.transpose(1, 2), columns * per_row.unsqueeze(-1))}
            if layer.bias is not None:
                result["bias"] = torch.bmm(per_row.unsqueeze(1), rows)[:, 0]
            return result

        return ClipParts("ghost", squared, weighted_sum)
