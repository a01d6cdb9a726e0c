"""``nn.Embedding``: per-example gradients as sums of output gradients into the looked-up rows.

An example's gradient of the table is zero except in the rows it looks up,
where it is the sum of the output gradients at the positions that use the
row (none for ``padding_idx``). Its squared norm is
``sum_{l, l'} [i_l = i_l'] b_l . b_l'``: found without the table-sized
gradient when ``L^2`` is below the table's size (ghost clipping), and the
clipped sum adds the weighted output gradients into each trial's rows.

References
----------
Li et al. 2022, "Large language models can be strong differentially private
learners", sec. 4 and appendix (ghost clipping of embeddings).
"""

from __future__ import annotations

import torch
from torch import nn

from dpaudit.mechanisms.models.grad_sample.registry import ClipParts, LayerRule, register_rule

__all__ = ["EmbeddingRule"]


@register_rule(nn.Embedding)
class EmbeddingRule(LayerRule):
    """Embedding tables (inputs are indices; float inputs holding integers are read as indices)."""

    def refuse(self, layer):
        if layer.max_norm is not None:
            return "Embedding with max_norm (it renormalises the table during the forward pass)"
        if layer.scale_grad_by_freq:
            return "Embedding with scale_grad_by_freq"
        return None

    def forward(self, layer, params, x):
        table = params["weight"]  # (T, V, D)
        trials, rows, width = table.shape
        indices = x.long()
        offsets = torch.arange(trials, device=x.device).reshape(trials, *([1] * (x.dim() - 1))) * rows
        return table.reshape(trials * rows, width)[indices + offsets], indices.reshape(trials, x.shape[1], -1)

    def _outputs(self, layer, indices, backprops):
        outputs = backprops.reshape(*indices.shape, -1)  # (T, B, L, D)
        if layer.padding_idx is not None:
            outputs = outputs * (indices != layer.padding_idx).unsqueeze(-1).to(outputs.dtype)
        return outputs

    def gradients(self, layer, saved, backprops):
        indices = saved  # (T, B, L)
        outputs = self._outputs(layer, indices, backprops)
        trials, batch, positions, width = outputs.shape
        table = outputs.new_zeros(trials * batch, layer.num_embeddings, width)
        table.scatter_add_(1, indices.reshape(trials * batch, positions, 1).expand(-1, -1, width),
                           outputs.reshape(trials * batch, positions, width))
        return {"weight": table.reshape(trials, batch, layer.num_embeddings, width)}

    def clip_parts(self, layer, saved, backprops):
        indices = saved
        trials, batch, positions = indices.shape
        if positions * positions >= layer.num_embeddings * layer.embedding_dim:
            return ClipParts.from_gradients(self.gradients(layer, saved, backprops))
        outputs = self._outputs(layer, indices, backprops)  # (T, B, L, D)
        same = (indices.unsqueeze(-1) == indices.unsqueeze(-2)).to(outputs.dtype)  # (T, B, L, L)
        squared = (same * (outputs @ outputs.transpose(-1, -2))).sum(dim=(-1, -2))

        def weighted_sum(weights: torch.Tensor) -> dict[str, torch.Tensor]:
            rows = layer.num_embeddings
            offsets = torch.arange(trials, device=indices.device).reshape(trials, 1, 1) * rows
            table = outputs.new_zeros(trials * rows, outputs.shape[-1])
            table.index_add_(0, (indices + offsets).reshape(-1),
                             (outputs * weights[:, :, None, None]).reshape(-1, outputs.shape[-1]))
            return {"weight": table.reshape(trials, rows, -1)}

        return ClipParts("ghost", squared, weighted_sum)
