"""Built-in models, and per-example gradients of models stacked over a trial axis.

A model is a ``torch.nn.Module`` made by a factory ``factory(features,
classes)``; its parameters are stacked over trials
(``torch.func.stack_module_state``), and the gradient of every example's
loss for every trial comes layer by layer from ``grad_sample`` (its plan),
or from ``vmap(vmap(grad(...)))`` over ``torch.func.functional_call``:
either way one batched computation, no Python loop over trials or examples.

References
----------
PyTorch, ``torch.func`` (per-sample gradients and model ensembling).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable

import torch
from torch import nn
from torch.func import functional_call, grad, stack_module_state, vmap

from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.models.grad_sample import LayerPlan, plan_model

__all__ = ["MODELS", "Stacked", "build_model", "per_example_gradients"]


def _logistic(features: int, classes: int, hidden: int) -> nn.Module:
    return nn.Linear(features, 1)


def _softmax(features: int, classes: int, hidden: int) -> nn.Module:
    return nn.Linear(features, classes)


def _mlp(features: int, classes: int, hidden: int) -> nn.Module:
    return nn.Sequential(nn.Linear(features, hidden), nn.Tanh(), nn.Linear(hidden, classes))


#: name -> (factory(features, classes, hidden), convex): logistic and softmax regression are convex in
#: their parameters; the MLP is not.
MODELS: dict[str, tuple[Callable[[int, int, int], nn.Module], bool]] = {
    "logistic": (_logistic, True), "softmax": (_softmax, True), "mlp": (_mlp, False),
}


def build_model(name: str | Callable[[int, int], nn.Module], features: int, classes: int, hidden: int, seed: int,
                dtype: torch.dtype) -> nn.Module:
    """The model ``name`` (or a user's ``factory(features, classes)``) initialised from ``seed``.

    The initial parameters are public and the same for every trial. A user
    factory's module maps a batch of feature rows to one logit per class (or
    a single logit for two classes).
    """
    if callable(name):
        generator_state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        try:
            model = name(features, classes)
        except MemoryError:
            raise
        except Exception as exc:  # the user's code failed: a bad input, named, not an internal error
            label = str(name) if isinstance(name, str) else getattr(name, "__qualname__", repr(name))
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise ParameterError(f"model: the factory {label!r} raised {type(exc).__name__}"
                                 f"{': ' + detail if detail else ''}") from exc
        finally:
            torch.random.set_rng_state(generator_state)
        if not isinstance(model, nn.Module):
            raise ParameterError(f"model factory must return a torch.nn.Module, got {type(model).__name__}")
        return model.to(dtype)
    if name not in MODELS:
        raise ParameterError(f"model must be one of {', '.join(repr(m) for m in MODELS)}, got model={name!r}")
    if name == "logistic" and classes != 2:
        raise ParameterError(f"model='logistic' needs two classes, the data has {classes}; use model='softmax'")
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = MODELS[name][0](features, classes, hidden).to(dtype)
    finally:
        torch.random.set_rng_state(generator_state)
    return model


def _loss(output: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of one example: binary on one logit, softmax on several."""
    if output.shape[-1] == 1:
        return nn.functional.binary_cross_entropy_with_logits(output[..., 0], label.to(output.dtype))
    return nn.functional.cross_entropy(output, label.long())


class Stacked:
    """A model's parameters stacked over trials, flattened to one vector per trial on demand.

    ``examples``: a few records' features ``(k, ...)``, on which the layers of a model with a forward
    pass of its own are checked against ``torch.func`` before its plan is used (``grad_sample.traced``);
    without them such a model goes through ``torch.func`` as a whole.
    """

    def __init__(self, model: nn.Module, device: str = "cpu", examples: torch.Tensor | None = None) -> None:
        params, buffers = stack_module_state([model])
        self.device = torch.device(device)
        self.names = list(params)
        self.shapes = [params[name].shape[1:] for name in self.names]
        self.sizes = [int(torch.Size(shape).numel()) for shape in self.shapes]
        self.flat = torch.cat([params[name].reshape(1, -1) for name in self.names], dim=1).detach().to(self.device)
        self.buffers = {name: value[0].to(self.device) for name, value in buffers.items()}
        self.linear = isinstance(model, nn.Linear)
        self.model = copy.deepcopy(model).to("meta")  # the skeleton functional_call fills in (model untouched)
        self._source, self._examples = model, examples

    @functools.cached_property
    def plan(self) -> LayerPlan:
        """The path of each layer's per-example gradients (built on first use: a traced model is checked)."""
        return plan_model(self._source, self.names, self.device, self._examples)

    @property
    def size(self) -> int:
        return sum(self.sizes)

    def unflatten(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """``(..., P)`` -> the named parameter tensors, with the leading axes kept."""
        parts = torch.split(flat, self.sizes, dim=-1)
        lead = flat.shape[:-1]
        return {name: part.reshape(*lead, *shape) for name, part, shape in zip(self.names, parts, self.shapes)}


def _linear_gradients(stacked: Stacked, flat: torch.Tensor, inputs: torch.Tensor,
                      labels: torch.Tensor) -> torch.Tensor:
    """Closed-form per-example gradients of a linear model under cross-entropy (two batched products)."""
    params = stacked.unflatten(flat)
    weight, bias = params["weight"], params["bias"]  # (T, C, F), (T, C)
    logits = torch.einsum("tkf,tcf->tkc", inputs, weight) + bias.unsqueeze(1)
    if weight.shape[1] == 1:
        residual = torch.sigmoid(logits) - labels.unsqueeze(-1).to(logits.dtype)
    else:
        residual = torch.softmax(logits, dim=-1)
        residual = residual - nn.functional.one_hot(labels.long(), weight.shape[1]).to(logits.dtype)
    grad_weight = (residual.unsqueeze(-1) * inputs.unsqueeze(-2)).flatten(start_dim=2)
    return torch.cat([grad_weight, residual], dim=-1)


def per_example_gradients(stacked: Stacked, flat: torch.Tensor, inputs: torch.Tensor,
                          labels: torch.Tensor, *, closed_form: bool = True) -> torch.Tensor:
    """Gradients of each example's loss, ``(trials, batch, P)``, for parameters ``flat`` ``(trials, P)``.

    ``inputs`` is ``(trials, batch, features)`` and ``labels`` ``(trials, batch)``: each trial has its own
    batch. A plain ``nn.Linear`` (logistic and softmax regression) has its gradients in closed form; a
    model with a plan (a sequence of layers, or a module with its own ``forward`` whose layers passed the
    plan's check) has them layer by layer (``grad_sample``: closed forms where the registry has one,
    ``torch.func`` for the other layers); any other model, and ``closed_form=False``, goes through
    ``torch.func`` as a whole (``vmap`` over trials of ``vmap`` over examples of ``grad`` of
    ``functional_call``). Tests compare the paths.
    """
    if closed_form and stacked.linear:
        return _linear_gradients(stacked, flat, inputs, labels)
    if closed_form and stacked.plan.layered:
        return stacked.plan.per_example_gradients(stacked.unflatten, stacked.names, flat, inputs, labels)
    def loss(params_flat, x, y):
        params = stacked.unflatten(params_flat)
        output = functional_call(stacked.model, (params, stacked.buffers), (x.unsqueeze(0),))
        return _loss(output[0], y)

    per_example = vmap(grad(loss), in_dims=(None, 0, 0))
    return vmap(per_example, in_dims=(0, 0, 0))(flat, inputs, labels)
