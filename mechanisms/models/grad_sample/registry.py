"""The registry of per-layer rules: which layer kinds have closed-form per-example gradients.

A rule is a :class:`LayerRule` subclass registered for one or more
``torch.nn`` module types with :func:`register_rule`; registering a type
twice is refused, so a new layer kind is a new module, never an edit of a
dispatcher. Every tensor a rule sees is batched over trials and examples:
activations ``(T, B, ...)``, parameters ``(T, *shape)`` (each trial has its
own), per-example gradients ``(T, B, *shape)``.

References
----------
Opacus, ``opacus/grad_sample/`` (one grad sampler per layer kind, registered by type).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

__all__ = ["ClipParts", "LayerRule", "RULES", "merge", "register_rule", "rule_for", "split"]


class ClipParts:
    """What clipping needs from one layer: each example's squared gradient norm ``(T, B)``, and the sum of
    the per-example gradients weighted by ``(T, B)`` weights (a second product, called once).

    ``path`` says how the norms were found: ``"ghost"`` (from input and output-gradient norms, no
    per-example gradient formed) or ``"per-example"`` (from the gradients, formed once and reused).
    """

    __slots__ = ("path", "squared_norms", "weighted_sum")

    def __init__(self, path: str, squared_norms: torch.Tensor,
                 weighted_sum: Callable[[torch.Tensor], dict[str, torch.Tensor]]) -> None:
        self.path = path
        self.squared_norms = squared_norms
        self.weighted_sum = weighted_sum

    @classmethod
    def from_gradients(cls, gradients: dict[str, torch.Tensor]) -> "ClipParts":
        """Parts from per-example gradients ``{name: (T, B, *shape)}`` (formed once, reused by the sum)."""
        squared = sum(g.flatten(start_dim=2).square().sum(dim=-1) for g in gradients.values())

        def weighted_sum(weights: torch.Tensor) -> dict[str, torch.Tensor]:
            return {name: torch.einsum("tb,tbp->tp", weights, g.flatten(start_dim=2)).reshape(g.shape[:1] + g.shape[2:])
                    for name, g in gradients.items()}

        return cls("per-example", squared, weighted_sum)


class LayerRule:
    """Forward pass and per-example gradients of one layer kind, batched over trials and examples.

    Subclasses implement :meth:`forward` and :meth:`gradients`; :meth:`clip_parts`
    defaults to forming the gradients, and rules that can find norms without
    them (ghost clipping) override it. :meth:`refuse` names what a layer of the
    kind uses that the rule does not handle (the layer then goes through
    ``torch.func``).
    """

    #: the layer has trainable parameters (parameter-free layers only run forward)
    has_parameters: bool = True

    def refuse(self, layer: nn.Module) -> str | None:
        """Why this rule cannot treat ``layer`` (``None``: it can)."""
        return None

    def forward(self, layer: nn.Module, params: dict[str, torch.Tensor], x: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """The output ``(T, B, ...)`` for inputs ``x`` ``(T, B, ...)``, and what :meth:`gradients` needs of the input."""
        raise NotImplementedError

    def gradients(self, layer: nn.Module, saved: Any, backprops: torch.Tensor) -> dict[str, torch.Tensor]:
        """Per-example gradients ``{name: (T, B, *shape)}`` from the saved input and the output's gradients."""
        raise NotImplementedError

    def clip_parts(self, layer: nn.Module, saved: Any, backprops: torch.Tensor) -> ClipParts:
        """Squared per-example norms and the weighted sum (default: from the per-example gradients)."""
        return ClipParts.from_gradients(self.gradients(layer, saved, backprops))


#: layer type -> its rule (exact types: a subclass may change the forward pass, so it is not matched)
RULES: dict[type, LayerRule] = {}


def register_rule(*kinds: type) -> Callable[[type[LayerRule]], type[LayerRule]]:
    """Class decorator: register one instance of the rule for each layer type in ``kinds``.

    Raises
    ------
    ValueError
        If a type already has a rule.
    """
    def decorate(rule_class: type[LayerRule]) -> type[LayerRule]:
        rule = rule_class()
        for kind in kinds:
            if kind in RULES:
                raise ValueError(f"layer type {kind.__name__} already has the rule {type(RULES[kind]).__name__}")
        for kind in kinds:
            RULES[kind] = rule
        return rule_class

    return decorate


def rule_for(layer: nn.Module) -> tuple[LayerRule | None, str]:
    """The rule for ``layer`` and ``""``, or ``None`` and why there is none."""
    rule = RULES.get(type(layer))
    if rule is None:
        return None, f"no closed form for {type(layer).__name__}"
    reason = rule.refuse(layer)
    return (None, reason) if reason else (rule, "")


def merge(x: torch.Tensor) -> torch.Tensor:
    """``(T, B, ...)`` -> ``(T B, ...)``: the trial and example axes as one batch axis."""
    return x.reshape(x.shape[0] * x.shape[1], *x.shape[2:])


def split(x: torch.Tensor, trials: int) -> torch.Tensor:
    """``(T B, ...)`` -> ``(T, B, ...)``."""
    return x.reshape(trials, x.shape[0] // trials, *x.shape[1:])
