"""``nn.AvgPool1d`` / ``nn.AvgPool2d``: average pooling of small planes as one product, batched over trials.

Average pooling with windows that tile the plane (stride equal to the
kernel, no padding) is linear: every plane of ``H x W`` entries maps to its
``Ho x Wo`` window means through a fixed ``(H W, Ho Wo)`` matrix. On the
small planes of models trained many times (8 x 8 digits), one matrix
product over all planes of all trials and examples, and its transpose in
the backward pass, are several times faster than torch's pooling kernel,
which spends its time per plane; larger planes, overlapping or padded
windows and ``ceil_mode`` use that kernel. The output is the same up to
the order of the additions. The same product serves ``F.avg_pool1d`` and
``F.avg_pool2d`` called from a model's own ``forward``
(:class:`PoolingFunctions`, active while ``traced`` runs it).
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn
from torch.overrides import TorchFunctionMode

from dpaudit.mechanisms.models.grad_sample.registry import LayerRule, merge, register_rule, split

__all__ = ["AvgPoolRule", "MAX_WINDOWS", "PoolingFunctions", "pool_by_product"]

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


def _tiles(layer: nn.AvgPool1d | nn.AvgPool2d, shape: torch.Size) -> tuple[int, int, int, int] | None:
    """``(H, W, kh, kw)`` when the layer's windows tile planes of at most :data:`MAX_WINDOWS` windows, else
    ``None``."""
    one_dimensional = isinstance(layer, nn.AvgPool1d)
    kernel = _pair(layer.kernel_size, one_dimensional)
    stride = _pair(layer.stride if layer.stride not in (None, ()) else layer.kernel_size, one_dimensional)
    padding = _pair(layer.padding, one_dimensional, height=0)
    if stride != kernel or padding != (0, 0) or layer.ceil_mode or len(shape) < (2 if one_dimensional else 3):
        return None
    height, width = (1, shape[-1]) if one_dimensional else (shape[-2], shape[-1])
    windows = (height // kernel[0]) * (width // kernel[1])
    return (height, width, *kernel) if 0 < windows <= MAX_WINDOWS else None


def pool_by_product(layer: nn.AvgPool1d | nn.AvgPool2d, x: torch.Tensor) -> torch.Tensor | None:
    """``layer(x)`` as a product with the pooling matrix over every plane of ``x`` (any leading axes), or
    ``None`` where the windows do not tile small planes."""
    tiles = _tiles(layer, x.shape)
    if tiles is None:
        return None
    height, width, kh, kw = tiles
    divisor = getattr(layer, "divisor_override", None) or kh * kw
    matrix = _pooling_matrix(height, width, (kh, kw), float(divisor), x.dtype, str(x.device))
    one_dimensional = isinstance(layer, nn.AvgPool1d)
    lead = x.shape[:-1] if one_dimensional else x.shape[:-2]
    out = torch.mm(x.reshape(-1, height * width), matrix)
    return out.reshape(*lead, *((width // kw,) if one_dimensional else (height // kh, width // kw)))


@register_rule(nn.AvgPool1d, nn.AvgPool2d)
class AvgPoolRule(LayerRule):
    """Average pooling: a product with the pooling matrix on small tiled planes, else torch's kernel."""

    has_parameters = False

    def forward(self, layer, params, x):
        out = pool_by_product(layer, x)
        return (split(layer(merge(x)), x.shape[0]) if out is None else out), None


class PoolingFunctions(TorchFunctionMode):
    """While active, ``F.avg_pool1d`` / ``F.avg_pool2d`` called by a model's own ``forward`` pool small tiled
    planes by the same product as :class:`AvgPoolRule` (any other call, and every other function, runs as
    is); ``used`` records which of the two were routed so."""

    #: function -> (its layer, the input dimensions it takes)
    FUNCTIONS = {F.avg_pool1d: (nn.AvgPool1d, (2, 3)), F.avg_pool2d: (nn.AvgPool2d, (3, 4))}

    def __init__(self) -> None:
        super().__init__()
        self.used: set[str] = set()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        kind, dims = self.FUNCTIONS.get(func, (None, ()))
        if kind is not None and args and isinstance(args[0], torch.Tensor) and args[0].dim() in dims:
            try:
                layer = kind(*args[1:], **kwargs)
            except TypeError:  # arguments the layer does not take: the function itself decides
                layer = None
            out = None if layer is None else pool_by_product(layer, args[0])
            if out is not None:
                self.used.add(func.__name__)
                return out
        return func(*args, **kwargs)
