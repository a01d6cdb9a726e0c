"""Layers without parameters between the trained ones: activations, pooling, flattening and reshapes.

They act on each example separately, so trials and examples are merged
into one batch axis, the layer runs once, and the axes are split again;
autograd carries the output gradients back through them. (Average pooling
has a rule of its own, ``pooling``: on small planes a product is faster.)
"""

from __future__ import annotations

from torch import nn

from dpaudit.mechanisms.models.grad_sample.registry import LayerRule, merge, register_rule, split

__all__ = ["ParameterFreeRule"]

ACTIVATIONS = (nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.ELU, nn.SELU, nn.CELU, nn.GELU, nn.SiLU, nn.Mish, nn.Tanh,
               nn.Sigmoid, nn.Softplus, nn.Softsign, nn.Hardtanh, nn.Hardswish, nn.Hardsigmoid, nn.Tanhshrink,
               nn.LogSigmoid, nn.Identity)
POOLING = (nn.MaxPool1d, nn.MaxPool2d, nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d,
           nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d)
RESHAPES = (nn.Flatten, nn.Unflatten, nn.Softmax, nn.LogSoftmax)


@register_rule(*ACTIVATIONS, *POOLING, *RESHAPES)
class ParameterFreeRule(LayerRule):
    """Any layer that maps each example on its own, with the example axis first."""

    has_parameters = False

    def refuse(self, layer):
        if isinstance(layer, nn.Flatten) and layer.start_dim == 0:
            return "Flatten(start_dim=0) flattens the example axis"
        if isinstance(layer, nn.Unflatten) and layer.dim == 0:
            return "Unflatten(dim=0) splits the example axis"
        if isinstance(layer, (nn.Softmax, nn.LogSoftmax)) and layer.dim in (None, 0):
            return f"{type(layer).__name__}(dim={layer.dim}) is taken over the example axis"
        if getattr(layer, "return_indices", False):
            return f"{type(layer).__name__} with return_indices"
        return None

    def forward(self, layer, params, x):
        return split(layer(merge(x)), x.shape[0]), None
