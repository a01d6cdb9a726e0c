"""A model as a sequence of layers, each with its way to per-example gradients, batched over trials.

:func:`plan_layers` flattens a model made of (nested) ``nn.Sequential`` s into
its layers and gives each one a path: a closed form from the registry, the
parameter-free forward pass, or ``torch.func`` for a layer the registry
cannot treat. A model whose forward pass is its own code is not a sequence
of layers: ``traced`` plans it from the layers it calls (a
:class:`~traced.ModulePlan`, which shares this class's gradients and
clipping), or it goes through ``torch.func`` as a whole, and the plan says so.

One step runs the layers forward on inputs ``(T, B, ...)`` with every
trial's own parameters, takes the gradients of the summed per-example
losses with respect to the outputs of the trained layers (one backward
pass from the losses' gradient with respect to the logits, in closed form:
examples do not interact, so each example's output gradient is its own
loss's), and hands each layer its input and output gradient.

References
----------
Goodfellow 2015, "Efficient per-example gradient computations"; Li et al.
2022, sec. 4 (ghost clipping); Opacus, ``opacus/grad_sample/``.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Iterator

import torch
from torch import nn

from dpaudit.mechanisms.models.grad_sample.fallback import FunctionalRule
from dpaudit.mechanisms.models.grad_sample.registry import ClipParts, LayerRule, rule_for

__all__ = ["LayerPlan", "LayerStep", "loss_gradient", "plan_layers", "summed_losses"]

#: ``Stacked.unflatten``: parameters ``(T, P)`` -> ``{name: (T, *shape)}``
Unflatten = Callable[[torch.Tensor], dict[str, torch.Tensor]]


@dataclasses.dataclass(frozen=True, slots=True)
class LayerStep:
    """One layer of a plan: the module, its rule, its parameters' names in the model, the path taken."""

    label: str
    layer: nn.Module
    rule: LayerRule
    names: dict[str, str]  # the layer's own parameter name -> the model's
    path: str


@dataclasses.dataclass(frozen=True, slots=True)
class LayerPlan:
    """The layers of a model with their paths, or ``steps=None`` and why the model goes through ``torch.func``."""

    steps: tuple[LayerStep, ...] | None
    reason: str = ""

    @property
    def layered(self) -> bool:
        return self.steps is not None

    def describe(self) -> list[str]:
        """One line per layer: ``"1 Conv2d: closed form"``, ``"2 Softsign: torch.func (no closed form ...)"``."""
        if self.steps is None:
            return [f"whole model: torch.func ({self.reason})"]
        return [f"{step.label}: {step.path}" for step in self.steps]

    def _run(self, flat_params: dict[str, torch.Tensor], inputs: torch.Tensor, labels: torch.Tensor):
        """Forward and backward pass: ``[(step, saved, output gradient)]`` for the trained layers."""
        x = inputs
        trained: list[tuple[LayerStep, object, torch.Tensor]] = []
        for step in self.steps:
            params = {own: flat_params[name] for own, name in step.names.items()}
            x, saved = step.rule.forward(step.layer, params, x)
            if step.names:
                trained.append((step, saved, x))
        outputs = [z for _, _, z in trained]
        backprops = torch.autograd.grad(x, outputs, grad_outputs=loss_gradient(x.detach(), labels))
        return [(step, saved, b) for (step, saved, _), b in zip(trained, backprops)]

    def per_example_gradients(self, unflatten: Unflatten, names: list[str], theta: torch.Tensor,
                              inputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Per-example gradients ``(T, B, P)`` in the order of ``names`` (a parameter used by several calls
        gets the sum of their gradients; one no call used, zeros)."""
        params = unflatten(theta.detach().requires_grad_())
        with torch.enable_grad():
            layers = self._run(params, inputs, labels)
        found = _summed_gradients(layers)
        shape = inputs.shape[:2]
        return torch.cat([found[name].flatten(start_dim=2) if name in found
                          else theta.new_zeros(*shape, params[name][0].numel()) for name in names], dim=-1)

    def clip_parts(self, unflatten: Unflatten, names: list[str], theta: torch.Tensor, inputs: torch.Tensor,
                   labels: torch.Tensor) -> tuple[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]]:
        """Each example's squared gradient norm ``(T, B)``, and ``weights (T, B) -> sum (T, P)``.

        A layer whose parameters no other call uses gives its own parts (ghost norms where its rule has
        them); the calls of parameters used more than once (a layer called twice, tied weights) form
        their per-example gradients, summed per parameter, and give parts from those.
        """
        params = unflatten(theta.detach().requires_grad_())
        with torch.enable_grad():
            layers = self._run(params, inputs, labels)
        uses = collections.Counter(name for step, _, _ in layers for name in step.names.values())
        alone = [(step, saved, b) for step, saved, b in layers if all(uses[n] == 1 for n in step.names.values())]
        shared = [(step, saved, b) for step, saved, b in layers if any(uses[n] > 1 for n in step.names.values())]
        parts: list[tuple[dict[str, str], ClipParts]] = [
            (step.names, step.rule.clip_parts(step.layer, saved, b.detach())) for step, saved, b in alone]
        if shared:
            summed = _summed_gradients(shared)
            parts.append(({name: name for name in summed}, ClipParts.from_gradients(summed)))
        squared = sum(part.squared_norms for _, part in parts).detach()

        def weighted_sum(weights: torch.Tensor) -> torch.Tensor:
            found: dict[str, torch.Tensor] = {}
            for own_names, part in parts:
                for own, total in part.weighted_sum(weights).items():
                    found[own_names[own]] = total.detach()
            return torch.cat([found[name].reshape(weights.shape[0], -1) if name in found
                              else weights.new_zeros(weights.shape[0], params[name][0].numel())
                              for name in names], dim=-1)

        return squared, weighted_sum

    def example_elements(self, unflatten: Unflatten, theta: torch.Tensor, inputs: torch.Tensor) -> int:
        """Entries held per example by a pass (activations and saved inputs), from one example of one trial."""
        total, x = 0, inputs[:1, :1]
        flat_params = unflatten(theta[:1])
        with torch.no_grad():
            for step in self.steps:
                params = {own: flat_params[name] for own, name in step.names.items()}
                x, saved = step.rule.forward(step.layer, params, x)
                total += x.numel() + sum(t.numel() for t in _tensors(saved))
        return total


def _summed_gradients(layers) -> dict[str, torch.Tensor]:
    """Per-example gradients ``{model name: (T, B, *shape)}`` of the calls in ``layers``, summed per parameter."""
    found: dict[str, torch.Tensor] = {}
    for step, saved, backprops in layers:
        for own, gradient in step.rule.gradients(step.layer, saved, backprops.detach()).items():
            name = step.names[own]
            found[name] = found[name] + gradient.detach() if name in found else gradient.detach()
    return found


def _tensors(saved) -> Iterator[torch.Tensor]:
    if isinstance(saved, torch.Tensor):
        yield saved
    elif isinstance(saved, (tuple, list)):
        for item in saved:
            yield from _tensors(item)
    elif isinstance(saved, dict):
        for item in saved.values():
            yield from _tensors(item)


def loss_gradient(output: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The gradient of :func:`summed_losses` with respect to the logits, in closed form: ``sigmoid(z) - y``
    on one logit, ``softmax(z) - onehot(y)`` on several (each example's own; autograd through the losses
    gives the same up to rounding, and torch's softmax over a last axis of a few classes is slow on a CPU)."""
    if output.shape[-1] == 1:
        return torch.sigmoid(output) - labels.unsqueeze(-1).to(output.dtype)
    exponentials = (output - output.amax(dim=-1, keepdim=True)).exp_()
    residual = exponentials.div_(exponentials.sum(dim=-1, keepdim=True))
    residual.scatter_add_(-1, labels.long().unsqueeze(-1), residual.new_full((*labels.shape, 1), -1.0))
    return residual


def summed_losses(output: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The sum over trials and examples of each example's cross-entropy: binary on one logit, softmax on several."""
    if output.shape[-1] == 1:
        return nn.functional.binary_cross_entropy_with_logits(output[..., 0], labels.to(output.dtype), reduction="sum")
    return nn.functional.cross_entropy(output.reshape(-1, output.shape[-1]), labels.reshape(-1).long(),
                                       reduction="sum")


def _leaves(module: nn.Module, prefix: str) -> Iterator[tuple[str, nn.Module]]:
    if type(module) is nn.Sequential:
        for name, child in module._modules.items():  # every use of a module (named_children skips repeats)
            yield from _leaves(child, f"{prefix}{name}.")
    else:
        yield prefix, module


def plan_layers(model: nn.Module, names: list[str], device: torch.device | str = "cpu") -> LayerPlan:
    """The plan of ``model`` whose stacked parameters are ``names`` (in ``named_parameters`` order)."""
    if type(model) is not nn.Sequential and rule_for(model)[0] is None:
        return LayerPlan(None, f"{type(model).__name__} has a forward pass of its own, not a sequence of layers")
    steps, seen = [], []
    for number, (prefix, layer) in enumerate(_leaves(model, "")):
        own = [name for name, _ in layer.named_parameters()]
        label = f"{prefix.rstrip('.') or number} {type(layer).__name__}"
        rule, reason = rule_for(layer)
        if any(True for _ in layer.buffers()) and rule is not None and rule.has_parameters is False:
            rule, reason = None, f"{type(layer).__name__} holds buffers"
        if rule is None:
            rule = FunctionalRule(layer, device)
            path = f"torch.func ({reason})"
        else:
            path = "closed form" if own else "parameter-free"
        steps.append(LayerStep(label, layer, rule, {name: prefix + name for name in own}, path))
        seen += [prefix + name for name in own]
    if sorted(seen) != sorted(names):  # a layer used twice shares its parameters: not a plain sequence
        return LayerPlan(None, "its layers share parameters")
    return LayerPlan(tuple(steps))
