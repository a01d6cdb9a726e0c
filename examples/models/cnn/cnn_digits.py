"""A small CNN for scikit-learn's digits (8 x 8 images), named in a config as ``model = "cnn_digits.py:cnn"``.

A 3 x 3 convolution with 4 channels, a tanh, 2 x 2 average pooling and a linear layer to the classes
(410 parameters). dpaudit calls ``cnn(features, classes)`` once, with the initialisation seed set
(``init_seed``), and trains the module it returns; the module maps a batch of feature rows (64 pixels,
scaled so each record has norm at most 1) to one logit per class.
"""

from __future__ import annotations

from torch import nn


def cnn(features: int, classes: int) -> nn.Module:
    side = int(round(features ** 0.5))
    if side * side != features:
        raise ValueError(f"cnn needs square images, got {features} features")
    pooled = (side - 2) // 2
    return nn.Sequential(
        nn.Unflatten(1, (1, side, side)),
        nn.Conv2d(1, 4, kernel_size=3),
        nn.Tanh(),
        nn.AvgPool2d(2),
        nn.Flatten(),
        nn.Linear(4 * pooled * pooled, classes),
    )
