"""``nn.Conv1d`` / ``nn.Conv2d``: a convolution as a product with the unfolded input, batched over trials.

Unfolding an example's input into ``L`` columns of ``p = C k`` entries (one
per output position) makes the convolution a product ``W U`` with the weight
``(O, p)``; the weight's per-example gradient is then ``B U^T`` with ``B``
``(O, L)`` the output's gradient, and the bias's the sum of ``B`` over
positions. Each trial has its own weight: the forward pass is one small
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


def _unfold(images: torch.Tensor, kernel: tuple[int, int], stride: tuple[int, int], dilation: tuple[int, int],
            padding: tuple[int, int]) -> torch.Tensor:
    """Each image's patches ``(C kh kw, L)``: one column per output position, rows channel-major like a weight's.

    One strided slice of the padded images per kernel offset, copied into
    place (``kh kw`` copies of the image; ``torch.nn.functional.unfold``
    loops over images and is slower on many small ones).
    """
    padded = torch.nn.functional.pad(images, (padding[1], padding[1], padding[0], padding[0]))
    size = [(padded.shape[2 + i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1 for i in range(2)]
    columns = images.new_empty(images.shape[0], images.shape[1], kernel[0], kernel[1], size[0], size[1])
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            rows = slice(i * dilation[0], i * dilation[0] + stride[0] * (size[0] - 1) + 1, stride[0])
            cols = slice(j * dilation[1], j * dilation[1] + stride[1] * (size[1] - 1) + 1, stride[1])
            columns[:, :, i, j] = padded[:, :, rows, cols]
    return columns.reshape(images.shape[0], -1, size[0] * size[1]), size


@register_rule(nn.Conv1d, nn.Conv2d)
class ConvRule(LayerRule):
    """One- and two-dimensional convolutions with zero padding and one group."""

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
        columns, size = _unfold(images, kernel, stride, dilation, padding)  # (T B, p, L)
        columns = columns.reshape(trials, batch, *columns.shape[1:])
        kernels = weight.reshape(trials, 1, weight.shape[1], -1)  # (T, 1, O, p)
        out = torch.matmul(kernels, columns)  # (T, B, O, L): one small product per example
        if bias is not None:
            out = out + bias[:, None, :, None]
        out = out.reshape(trials, batch, -1, size[1]) if isinstance(layer, nn.Conv1d) else \
            out.reshape(trials, batch, -1, *size)
        return out, columns

    def gradients(self, layer, saved, backprops):
        columns = saved  # (T, B, p, L)
        outputs = backprops.reshape(*backprops.shape[:3], -1)  # (T, B, O, L)
        result = {"weight": torch.matmul(outputs, columns.transpose(-1, -2)).reshape(*outputs.shape[:2],
                                                                                     *layer.weight.shape)}
        if layer.bias is not None:
            result["bias"] = outputs.sum(dim=-1)
        return result

    def clip_parts(self, layer, saved, backprops):
        columns = saved  # (T, B, p, L)
        trials, batch, width, positions = columns.shape
        outputs = backprops.reshape(trials, batch, backprops.shape[2], -1)  # (T, B, O, L)
        if positions * positions >= width * outputs.shape[2]:  # forming the gradients is cheaper
            return ClipParts.from_gradients(self.gradients(layer, saved, backprops))
        # |B U|^2 = sum_{l, l'} (U U^T)_{l l'} (B^T B)_{l l'}
        squared = ((columns.transpose(-1, -2) @ columns) * (outputs.transpose(-1, -2) @ outputs)).sum(dim=(-1, -2))
        if layer.bias is not None:
            squared = squared + outputs.sum(dim=-1).square().sum(dim=-1)

        def weighted_sum(weights: torch.Tensor) -> dict[str, torch.Tensor]:
            scaled = outputs * weights[:, :, None, None]  # (T, B, O, L)
            kernel = torch.bmm(scaled.transpose(1, 2).reshape(trials, scaled.shape[2], -1),
                               columns.transpose(2, 3).reshape(trials, -1, width))  # (T, O, p)
            result = {"weight": kernel.reshape(trials, *layer.weight.shape)}
            if layer.bias is not None:
                result["bias"] = scaled.sum(dim=(1, 3))
            return result

        return ClipParts("ghost", squared, weighted_sum)
