"""Any module: the layers its own forward pass calls, each with its closed form, found from the layers themselves.

A model whose ``forward`` is its own code (most users' models) is run as
written, on a batch whose rows are every trial's examples (the trial and
example axes merged). Its layers are found from the modules it holds, as
Opacus's ``GradSampleModule`` finds them with hooks: each module the
registry has a rule for, and each other module that holds parameters, is
a *unit*. In a private copy of the model every unit's ``forward`` is
replaced by one that splits the rows into trials and examples, runs the
unit's rule with every trial's own parameters (``torch.func`` for a unit
without a rule), records the unit's input and output (the output's
gradient is the unit's backprop: one backward pass from the summed
losses), and merges the rows again; a parameter-free module with a rule
runs its rule. Everything else in the user's ``forward`` (activations,
pooling, reshapes written as functions) runs as written, once, on all rows,
but for average pooling of small tiled planes, which takes the product of
``nn.AvgPool2d``'s rule (``pooling.PoolingFunctions``).

That is right when the forward pass treats rows as independent examples,
calls units on tensors with one row per example, and uses parameters only
through units. :func:`module_plan` checks it once, before the plan is used:
on a few records, two trials with different parameters, its per-example
gradients, squared norms and clipped sums must equal ``torch.func``'s (one
example at a time) to within ``sqrt(eps)`` of the dtype, relative to the
largest entry; otherwise the model goes through ``torch.func`` as a whole,
and the plan says why.

References
----------
Opacus, ``opacus/grad_sample/grad_sample_module.py`` (per-sample gradients
from activations and backprops captured on the layers); PyTorch,
``torch.func`` (the reference of the check).
"""

from __future__ import annotations

import copy
import dataclasses
import threading

import torch
from torch import nn
from torch.func import functional_call, grad, vmap

from dpaudit.mechanisms.models.grad_sample.fallback import FunctionalRule
from dpaudit.mechanisms.models.grad_sample.plan import (
    LayerPlan,
    LayerStep,
    Unflatten,
    _tensors,
    loss_gradient,
    plan_layers,
    summed_losses,
)
from dpaudit.mechanisms.models.grad_sample.pooling import PoolingFunctions
from dpaudit.mechanisms.models.grad_sample.registry import merge, rule_for, split

__all__ = ["ModulePlan", "module_plan", "plan_model"]

#: trials and examples of the check against ``torch.func``
CHECK_TRIALS, CHECK_EXAMPLES = 2, 3
#: the check's tolerance in units of ``sqrt(eps)`` of the dtype, relative to the reference's largest entry
#: (the two paths add in other orders: their differences are a few ``eps``; a wrong path's are of order one)
TOLERANCE = 4.0


@dataclasses.dataclass(frozen=True, slots=True)
class ModulePlan(LayerPlan):
    """A plan whose layers are called by the model's own ``forward`` (``model``: the copy with replaced units).

    ``steps`` are the units with parameters, ``free`` the labels of the
    parameter-free leaf modules (listed by :meth:`describe`; they run as
    written, or by their rule), ``calls`` how many times each unit was
    called by the check's forward pass, ``functions`` the pooling functions
    it called that were pooled by a product (``pooling.PoolingFunctions``).
    """

    model: nn.Module | None = None
    free: tuple[str, ...] = ()
    calls: dict[str, int] = dataclasses.field(default_factory=dict)
    functions: tuple[str, ...] = ()
    state: threading.local = dataclasses.field(default_factory=threading.local)

    def describe(self) -> list[str]:
        """One line per unit and parameter-free leaf: ``"conv Conv2d: closed form"``."""
        lines = []
        for step in self.steps:
            count = self.calls.get(step.label, 1)
            note = "" if count == 1 else (" (never called)" if count == 0 else
                                          f" (called {count} times a forward pass: per-example gradients formed)")
            lines.append(f"{step.label}: {step.path}{note}")
        return lines + [f"{label}: parameter-free" for label in self.free] + \
            [f"F.{name}: parameter-free (a product)" for name in self.functions]

    def _run(self, flat_params: dict[str, torch.Tensor], inputs: torch.Tensor, labels: torch.Tensor):
        """The model's own forward pass over every trial's examples, then one backward pass to the units."""
        state = self.state
        trials, batch = inputs.shape[:2]
        state.params, state.trials, state.rows, state.tape = flat_params, trials, trials * batch, []
        try:
            with PoolingFunctions() as functions:  # F.avg_pool2d of small planes: the product of nn.AvgPool2d
                output = split(self.model(merge(inputs)), trials)
            tape, state.functions = state.tape, functions.used
        finally:
            del state.params, state.tape
        outputs = [out for _, _, out in tape]
        backprops = torch.autograd.grad(output, outputs, grad_outputs=loss_gradient(output.detach(), labels),
                                        allow_unused=True)
        return [(step, saved, torch.zeros_like(out) if b is None else b)
                for (step, saved, out), b in zip(tape, backprops)]

    def example_elements(self, unflatten: Unflatten, theta: torch.Tensor, inputs: torch.Tensor) -> int:
        """Entries held per example by a pass: what autograd saves, and what the units record."""
        total = 0

        def count(tensor: torch.Tensor) -> torch.Tensor:
            nonlocal total
            total += tensor.numel()
            return tensor

        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(count, lambda tensor: tensor):
            layers = self._run(unflatten(theta[:1].detach().requires_grad_()), inputs[:1, :1],
                               torch.zeros(1, 1, dtype=inputs.dtype, device=inputs.device))
        return total + sum(t.numel() for _, saved, _ in layers for t in _tensors(saved))


def _replaced_forward(state: threading.local, step: LayerStep, native):
    """The ``forward`` of a unit in the plan's copy: its rule on every trial's parameters, recorded (a
    parameter-free layer's rule is only run, and the layer runs as written on anything but one row per
    example: ``native``)."""
    def forward(*args: torch.Tensor, **kwargs) -> torch.Tensor:
        if not step.names and (len(args) != 1 or kwargs or not isinstance(args[0], torch.Tensor)
                               or args[0].dim() == 0 or args[0].shape[0] != state.rows):
            return native(*args, **kwargs)
        if len(args) != 1 or kwargs:
            raise TypeError(f"{step.label} is called with {len(args)} inputs and {len(kwargs)} keywords; "
                            f"a unit takes one tensor")
        x = args[0]
        if x.shape[0] != state.rows:
            raise ValueError(f"{step.label} gets {x.shape[0]} rows, not one per example ({state.rows})")
        params = {own: state.params[name] for own, name in step.names.items()}
        out, saved = step.rule.forward(step.layer, params, split(x, state.trials))
        if step.names:
            state.tape.append((step, saved, out))
        return merge(out)

    return forward


def _units(model: nn.Module) -> tuple[list[tuple[str, nn.Module]], list[tuple[str, nn.Module]], str]:
    """The units (modules with a rule, or holding parameters themselves) and parameter-free leaves of
    ``model``, by qualified name, and why none can be used (``""``: they can)."""
    units, free, seen = [], [], set()

    def walk(prefix: str, module: nn.Module) -> None:
        if id(module) in seen:  # a module held twice is one unit, called wherever it is used
            return
        seen.add(id(module))
        own = [name for name, value in module._parameters.items() if value is not None]
        if rule_for(module)[0] is not None or own:
            (units if any(True for _ in module.parameters()) else free).append((prefix, module))
            return
        if not module._modules:
            free.append((prefix, module))
        for name, child in module._modules.items():
            if child is not None:
                walk(f"{prefix}.{name}" if prefix else name, child)

    walk("", model)
    if any(prefix == "" for prefix, _ in units):
        return [], [], f"{type(model).__name__} holds parameters of its own, not only in layers"
    return units, free, ""


def plan_model(model: nn.Module, names: list[str], device: torch.device | str = "cpu",
               examples: torch.Tensor | None = None) -> LayerPlan:
    """The plan of any model: a (nested) ``nn.Sequential`` or a single layer is walked
    (:func:`~plan.plan_layers`); a model with a forward pass of its own is traced and checked on ``examples``
    (:func:`module_plan`)."""
    if type(model) is nn.Sequential or rule_for(model)[0] is not None:
        return plan_layers(model, names, device)
    return module_plan(model, names, device, examples)


def module_plan(model: nn.Module, names: list[str], device: torch.device | str,
                examples: torch.Tensor | None) -> LayerPlan:
    """The plan of a model with its own ``forward`` (module docstring), checked on ``examples`` ``(k, ...)``
    (at least two records), or ``LayerPlan(None, reason)``."""
    label = type(model).__name__
    if examples is None:
        return LayerPlan(None, f"{label} has a forward pass of its own and no records were given to check "
                               f"its layers on")
    units, free, reason = _units(model)
    if reason:
        return LayerPlan(None, reason)
    name_of = {id(value): name for name, value in model.named_parameters()}
    state = threading.local()
    traced = copy.deepcopy(model).to(device)
    steps = []
    for prefix, unit in units:
        copied = traced.get_submodule(prefix)
        rule, why = rule_for(unit)
        if rule is None:
            rule = FunctionalRule(unit, device)
        step = LayerStep(f"{prefix} {type(unit).__name__}", copy.deepcopy(unit).to(device), rule,
                         {own: name_of[id(value)] for own, value in unit.named_parameters()},
                         "closed form" if why == "" else f"torch.func ({why})")
        copied.forward = _replaced_forward(state, step, copied.forward)
        steps.append(step)
    for prefix, leaf in free:  # a parameter-free layer with a rule runs it (pooling has a faster one)
        rule, _ = rule_for(leaf)
        if rule is not None:
            copied = traced.get_submodule(prefix)
            step = LayerStep(f"{prefix} {type(leaf).__name__}", copy.deepcopy(leaf).to(device), rule, {},
                             "parameter-free")
            copied.forward = _replaced_forward(state, step, copied.forward)
    for module in traced.modules():  # parameters are used only through units: anything else fails loudly
        for key, value in module._parameters.items():
            if value is not None:
                module._parameters[key] = nn.Parameter(value.detach().to("meta"), requires_grad=False)
    plan = ModulePlan(tuple(steps), model=traced, free=tuple(f"{p} {type(m).__name__}" for p, m in free),
                      state=state)
    mismatch, calls, functions = _check(plan, model, names, device, examples)
    if mismatch:
        return LayerPlan(None, f"{label}: {mismatch}")
    return dataclasses.replace(plan, calls=calls, functions=functions)


def _check(plan: ModulePlan, model: nn.Module, names: list[str], device: torch.device | str,
           examples: torch.Tensor) -> tuple[str, dict[str, int], tuple[str, ...]]:
    """Compare the plan with ``torch.func`` on ``examples``: ``("", calls per unit, pooling functions pooled
    by a product)``, or what differs."""
    reference_model = copy.deepcopy(model).to(device)
    params = dict(reference_model.named_parameters())
    buffers = {name: value for name, value in reference_model.named_buffers()}
    shapes = [params[name].shape for name in names]
    sizes = [shape.numel() for shape in shapes]
    flat = torch.cat([params[name].detach().reshape(-1) for name in names])
    generator = torch.Generator().manual_seed(0)
    noise = torch.randn(CHECK_TRIALS - 1, flat.numel(), generator=generator, dtype=torch.float64)
    spread = float(flat.abs().mean()) + 1e-3
    theta = torch.cat([flat.unsqueeze(0), flat + spread * noise.to(flat.device, flat.dtype)])

    def unflatten(values: torch.Tensor) -> dict[str, torch.Tensor]:
        parts = torch.split(values, sizes, dim=-1)
        return {name: part.reshape(*values.shape[:-1], *shape) for name, part, shape in zip(names, parts, shapes)}

    records = examples.to(device, flat.dtype)
    rows = torch.stack([records[(torch.arange(CHECK_EXAMPLES) + t) % records.shape[0]] for t in
                        range(CHECK_TRIALS)])  # (T, B, ...): each trial its own examples

    def one_loss(trial_params, example, label):
        out = functional_call(reference_model, (trial_params, buffers), (example.unsqueeze(0),))
        return summed_losses(out.unsqueeze(0), label.reshape(1, 1))

    try:
        with torch.no_grad():
            width = functional_call(reference_model, (unflatten(flat), buffers), (records[:1],)).shape[-1]
        labels = (torch.arange(CHECK_TRIALS * CHECK_EXAMPLES, device=flat.device) % max(width, 2)).reshape(
            CHECK_TRIALS, CHECK_EXAMPLES).to(flat.dtype)
        with torch.enable_grad():
            expected = vmap(vmap(grad(one_loss), in_dims=(None, 0, 0)))(unflatten(theta), rows, labels)
        expected = torch.cat([expected[name].flatten(start_dim=2) for name in names], dim=-1)
    except Exception as error:  # noqa: BLE001 - any failure of the reference decides the path, with its message
        return f"torch.func cannot run it one example at a time either ({_first_line(error)})", {}, ()
    try:
        found = plan.per_example_gradients(unflatten, names, theta, rows, labels)
        squared, weighted_sum = plan.clip_parts(unflatten, names, theta, rows, labels)
        weights = torch.linspace(0.25, 1.0, CHECK_TRIALS * CHECK_EXAMPLES, dtype=flat.dtype,
                                 device=flat.device).reshape(CHECK_TRIALS, CHECK_EXAMPLES)
        total = weighted_sum(weights)
        with torch.enable_grad():
            counted = plan._run(unflatten(theta.detach().requires_grad_()), rows, labels)
        functions = tuple(sorted(plan.state.functions))
        checks = {"per-example gradients": (found, expected),
                  "squared norms": (squared, expected.square().sum(dim=-1)),
                  "clipped sums": (total, (weights.unsqueeze(-1) * expected).sum(dim=1))}
        for what, (value, reference) in checks.items():
            tolerance = TOLERANCE * torch.finfo(flat.dtype).eps ** 0.5 * float(reference.abs().max())
            if value.shape != reference.shape or not float((value - reference).abs().max()) <= tolerance:
                return f"its layers' {what} differ from torch.func's (the forward pass mixes examples or " \
                       f"uses parameters outside its layers)", {}, ()
    except Exception as error:  # noqa: BLE001 - a forward pass the units cannot follow: torch.func for all
        return f"its layers cannot be run with every trial's parameters ({_first_line(error)})", {}, ()
    calls = {step.label: 0 for step in plan.steps}
    for step, _, _ in counted:
        calls[step.label] += 1
    return "", calls, functions


def _first_line(error: Exception) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
