"""``nn.Conv1d`` / ``nn.Conv2d``: a convolution as a product with the unfolded input, batched over trials.

Unfolding an example's input into its patches ``U``, ``L`` rows of ``p = C k``
entries (one per output position), makes the convolution a product
``W U^T`` with the weight ``(O, p)``; the weight's per-example gradient is
then ``B U`` with ``B`` ``(O, L)`` the output's gradient, and the bias's the
sum of ``B`` over positions. Each trial has its own weight: the forward pass is one small
product per example, batched over trials and examples. Norms come from the
gradient when ``O p`` is smaller than ``L^2``, else from the Gram matrices of
``U`` and ``B`` (ghost clipping).

References
----------
Goodfellow 2015, "Efficient per-example gradient computations"; Rochette et
al. 2019, "Efficient per-example gradient computations in convolutional
neural networks"; Bu et al. 2022, "Scalable and efficient training of large
convolutional neural networks with differential privacy" (mixed ghost clipping).
"""

from __future__ import annotations

import functools

import torch
from torch import nn

from dpaudit.mechanisms.models.grad_sample.registry import ClipParts, LayerRule, register_rule

__all__ = ["ConvRule"]


def _as_2d(layer: nn.Conv1d | nn.Conv2d) -> tuple[tuple[int, int], ...]:
    """Kernel, stride, dilation and padding of the layer as a 2-D convolution (a 1-D one has height 1)."""
    kernel, stride, dilation = layer.kernel_size, layer.stride, layer.dilation
    if layer.padding == "valid":
        padding = (0,) * len(kernel)
    elif layer.padding == "same":
        # stride 1 (torch refuses 'same' otherwise): every side pads half the dilated kernel; an odd
        # total pads one more on the right, which unfold cannot do: refused in ConvRule.refuse
        padding = tuple(d * (k - 1) // 2 for k, d in zip(kernel, dilation))
    else:
        padding = layer.padding
    if isinstance(layer, nn.Conv1d):
        return (1, kernel[0]), (1, stride[0]), (1, dilation[0]), (0, padding[0])
    return tuple(kernel), tuple(stride), tuple(dilation), tuple(padding)


@functools.lru_cache(maxsize=64)
def _patch_index(channels: int, height: int, width: int, kernel: tuple[int, int], stride: tuple[int, int],
                 dilation: tuple[int, int], padding: tuple[int, int], ones: bool,
                 device: str = "cpu") -> tuple[torch.Tensor, tuple[int, int]]:
    """Where each patch entry sits in an image flattened to ``C H W`` entries followed by a 0 and a 1:
    ``(L (p + ones),)`` indices, position-major, each patch's ``p = C kh kw`` entries channel-major like a
    weight's (entries in the zero padding point at the 0), then the 1 if ``ones``, on ``device``; and the
    output size."""
    rows, cols = height + 2 * padding[0], width + 2 * padding[1]
    size = [(extent - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1 for i, extent in enumerate((rows, cols))]
    row = ((torch.arange(size[0]) * stride[0]).reshape(-1, 1) + torch.arange(kernel[0]) * dilation[0]
           - padding[0])  # (Ho, kh): the image row of each output row and kernel row
    col = ((torch.arange(size[1]) * stride[1]).reshape(-1, 1) + torch.arange(kernel[1]) * dilation[1]
           - padding[1])  # (Wo, kw)
    inside = ((row >= 0) & (row < height)).reshape(-1, 1, 1, 1, kernel[0], 1) & \
        ((col >= 0) & (col < width)).reshape(1, -1, 1, 1, 1, kernel[1])
    index = (torch.arange(channels).reshape(1, 1, -1, 1, 1, 1) * height * width
             + row.reshape(-1, 1, 1, 1, kernel[0], 1) * width + col.reshape(1, -1, 1, 1, 1, kernel[1]))
    index = torch.where(inside, index, channels * height * width)  # (Ho, Wo, C, 1, kh, kw)
    index = index.reshape(size[0] * size[1], -1)  # (L, p)
    if ones:
        index = torch.cat([index, index.new_full((index.shape[0], 1), channels * height * width + 1)], dim=1)
    return index.reshape(-1).to(device), tuple(size)


def _unfold(images: torch.Tensor, kernel: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int],
            padding: tuple[int, int], ones: bool = False) -> tuple[torch.Tensor, tuple[int, int]]:
    """Each image's patches ``(L, C kh kw)``: one row per output position, entries channel-major like a weight's
    (then a 1 with ``ones``: the bias's column, so one product gives a weight's and a bias's terms).

    One gather (``index_select``) from each image's entries followed by a 0 (the
    zero padding) and a 1: a patch row is contiguous, so the forward product
    and the per-example gradient ``B U`` read it directly (a copy per kernel
    offset of strided rows of ``kw`` entries, or ``torch.nn.functional.unfold``,
    which loops over images, are two to eight times slower on many small images).
    """
    count, channels, height, width = images.shape
    index, size = _patch_index(channels, height, width, kernel, stride, dilation, padding, ones, str(images.device))
    flat = torch.cat([images.reshape(count, -1), images.new_tensor([0.0, 1.0]).expand(count, 2)], dim=1)
    patches = flat.index_select(1, index)
    return patches.reshape(count, size[0] * size[1], -1), size


@register_rule(nn.Conv1d, nn.Conv2d)
class ConvRule(LayerRule):
    """One- and two-dimensional convolutions with zero padding and one group.

    Patches carry a column of ones when the layer has a bias: the forward
    product adds the bias, and the per-example product ``B U`` gives the
    bias's gradient (the sum of ``B`` over positions) in its last column.
    """

    def refuse(self, layer):
        if layer.groups != 1:
            return f"{type(layer).__name__} with groups={layer.groups} (one group only)"
        if layer.padding_mode != "zeros":
            return f"{type(layer).__name__} with padding_mode={layer.padding_mode!r} (zeros only)"
        if layer.padding == "same" and any(d * (k - 1) % 2 for k, d in zip(layer.kernel_size, layer.dilation)):
            return f"{type(layer).__name__} with padding='same' and an even dilated kernel"
        return None

    def forward(self, layer, params, x):
        kernel, stride, dilation, padding = _as_2d(layer)
        weight, bias = params["weight"], params.get("bias")
        trials, batch = x.shape[:2]
        images = x.reshape(trials * batch, *x.shape[2:])
        if isinstance(layer, nn.Conv1d):
            images = images.unsqueeze(-2)
        patches, size = _unfold(images, kernel, stride, dilation, padding, bias is not None)  # (T B, L, p [+ 1])
        patches = patches.reshape(trials, batch, *patches.shape[1:])
        kernels = weight.reshape(trials, weight.shape[1], -1)  # (T, O, p)
        if bias is not None:
            kernels = torch.cat([kernels, bias.unsqueeze(-1)], dim=-1)
        # one product per trial over all its examples' patches, (T, O, B L), then examples first: the copy
        # moves rows of L entries (a product per example, or the (B L, O) product, is slower on small kernels)
        out = torch.bmm(kernels, patches.reshape(trials, -1, patches.shape[-1]).transpose(1, 2))
        out = out.reshape(trials, -1, batch, patches.shape[2]).transpose(1, 2).contiguous()  # (T, B, O, L)
        out = out.reshape(trials, batch, -1, size[1]) if isinstance(layer, nn.Conv1d) else \
            out.reshape(trials, batch, -1, *size)
        return out, patches

    def _split(self, layer, products: torch.Tensor) -> dict[str, torch.Tensor]:
        """``(..., O, p [+ 1])`` products with the patches -> the weight's (and bias's) part."""
        if layer.bias is None:
            return {"weight": products.reshape(*products.shape[:-2], *layer.weight.shape)}
        return {"weight": products[..., :-1].reshape(*products.shape[:-2], *layer.weight.shape),
                "bias": products[..., -1]}

    def gradients(self, layer, saved, backprops):
        patches = saved  # (T, B, L, p [+ 1])
        outputs = backprops.reshape(*backprops.shape[:3], -1)  # (T, B, O, L)
        return self._split(layer, torch.matmul(outputs, patches))

    def clip_parts(self, layer, saved, backprops):
        patches = saved  # (T, B, L, p [+ 1])
        trials, batch, positions, width = patches.shape
        outputs = backprops.reshape(trials, batch, backprops.shape[2], -1)  # (T, B, O, L)
        if positions * positions >= width * outputs.shape[2]:  # forming the gradients is cheaper
            products = torch.matmul(outputs, patches).reshape(trials, batch, -1)  # (T, B, O (p [+ 1]))
            squared = torch.linalg.vector_norm(products, dim=-1).square()

            def formed_sum(weights: torch.Tensor) -> dict[str, torch.Tensor]:
                total = torch.bmm(weights.unsqueeze(1), products)[:, 0]
                return self._split(layer, total.reshape(trials, outputs.shape[2], width))

            return ClipParts("per-example", squared, formed_sum)
        # |B U|^2 = sum_{l, l'} (U U^T)_{l l'} (B^T B)_{l l'}, U = patches (L, p [+ 1]): with the ones column,
        # U U^T gains a 1 everywhere, which adds |B 1|^2, the bias's squared norm
        squared = ((patches @ patches.transpose(-1, -2)) * (outputs.transpose(-1, -2) @ outputs)).sum(dim=(-1, -2))

        def weighted_sum(weights: torch.Tensor) -> dict[str, torch.Tensor]:
            scaled = outputs * weights[:, :, None, None]  # (T, B, O, L)
            total = torch.bmm(scaled.transpose(1, 2).reshape(trials, scaled.shape[2], -1),
                              patches.reshape(trials, -1, width))  # (T, O, p [+ 1])
            return self._split(layer, total)

        return ClipParts("ghost", squared, weighted_sum)
