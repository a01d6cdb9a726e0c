"""``nn.AvgPool1d`` / ``nn.AvgPool2d``: average pooling of small planes as one product, batched over trials.

Average pooling with windows that tile the plane (stride equal to the
kernel, no padding) is linear: every plane of ``H x W`` entries maps to its
``Ho x Wo`` window means through a fixed ``(H W, Ho Wo)`` matrix. On the
small planes of models trained many times (8 x 8 digits), one matrix
product over all planes of all trials and examples, and its transpose in
the backward pass, are several times faster than torch's pooling kernel,
which spends its time per plane; larger planes, overlapping or padded
windows and ``ceil_mode`` use that kernel. The output is the same up to
the order of the additions.
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from dpaudit.mechanisms.models.grad_sample.registry import LayerRule, merge, register_rule, split

__all__ = ["AvgPoolRule", "MAX_WINDOWS"]

#: planes with at most this many windows are pooled by a product (each input entry costs this many
#: multiply-adds there, against a kernel call per plane)
MAX_WINDOWS = 64


def _pair(value: int | tuple[int, ...], one_dimensional: bool, height: int = 1) -> tuple[int, int]:
    """A size as ``(along H, along W)``; a one-dimensional layer's planes have height 1 (``height``)."""
    if isinstance(value, int):
        return (height, value) if one_dimensional else (value, value)
    return (height, value[0]) if one_dimensional else (value[0], value[1])


@functools.lru_cache(maxsize=32)
def _pooling_matrix(height: int, width: int, kernel: tuple[int, int], divisor: float, dtype: torch.dtype,
                    device: str) -> torch.Tensor:
    """The ``(H W, Ho Wo)`` matrix of window means over an ``H x W`` plane (rows and columns past the last
    whole window are dropped, as torch's pooling does)."""
    rows, cols = height // kernel[0], width // kernel[1]
    matrix = torch.zeros(height, width, rows, cols, dtype=dtype)
    for i in range(rows * kernel[0]):
        for j in range(cols * kernel[1]):
            matrix[i, j, i // kernel[0], j // kernel[1]] = 1.0 / divisor
    return matrix.reshape(height * width, rows * cols).to(device)


@register_rule(nn.AvgPool1d, nn.AvgPool2d)
class AvgPoolRule(LayerRule):
    """Average pooling: a product with the pooling matrix on small tiled planes, else torch's kernel."""

    has_parameters = False

    def _tiles(self, layer: nn.AvgPool1d | nn.AvgPool2d, shape: torch.Size) -> tuple[int, int, int, int] | None:
        """``(H, W, kh, kw)`` when the windows tile planes of at most :data:`MAX_WINDOWS` windows, else ``None``."""
        one_dimensional = isinstance(layer, nn.AvgPool1d)
        kernel = _pair(layer.kernel_size, one_dimensional)
        stride = _pair(layer.stride if layer.stride is not None else layer.kernel_size, one_dimensional)
        padding = _pair(layer.padding, one_dimensional, height=0)
        if stride != kernel or padding != (0, 0) or layer.ceil_mode:
            return None
        height, width = (1, shape[-1]) if one_dimensional else (shape[-2], shape[-1])
        windows = (height // kernel[0]) * (width // kernel[1])
        return (height, width, *kernel) if 0 < windows <= MAX_WINDOWS else None

    def forward(self, layer, params, x):
        tiles = self._tiles(layer, x.shape)
        if tiles is None:
            return split(layer(merge(x)), x.shape[0]), None
        height, width, kh, kw = tiles
        divisor = getattr(layer, "divisor_override", None) or kh * kw
        matrix = _pooling_matrix(height, width, (kh, kw), float(divisor), x.dtype, str(x.device))
        lead = x.shape[:-1] if isinstance(layer, nn.AvgPool1d) else x.shape[:-2]
        out = torch.mm(x.reshape(-1, height * width), matrix)
        shape = (width // kw,) if isinstance(layer, nn.AvgPool1d) else (height // kh, width // kw)
        return out.reshape(*lead, *shape), None
