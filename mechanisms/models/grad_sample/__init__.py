"""Per-example gradients of a model's layers in closed form, batched over trials as well as examples.

One module per layer kind (``linear``, ``conv``, ``embedding``,
``layer_norm``, ``group_norm``, ``pooling``, ``parameter_free``), each registering a
:class:`~registry.LayerRule` for its ``torch.nn`` types; ``fallback`` is
``torch.func`` for any other layer, and ``plan`` turns a model into its
layers with the path each one takes; ``traced`` does the same for a model
whose ``forward`` is its own code, from the layers it calls.

Which way to clip
-----------------
A layer's per-example gradient norms can be found two ways: by forming
every example's gradient (``O x p`` entries for a weight of ``O`` outputs and
``p`` inputs) or from the Gram matrices of its inputs and output gradients
over the ``L`` positions of an example (``L x L`` entries: ghost clipping).
Each rule takes the smaller: a dense layer on feature rows (``L = 1``)
never forms its gradients; a small convolution over many positions does,
once, and reuses them for the clipped sum. Either way the clipped sum of
a batch is one more product per trial, weighted by the clipping factors.

References
----------
Goodfellow 2015, "Efficient per-example gradient computations"; Li et al.
2022, "Large language models can be strong differentially private
learners", sec. 4; Bu et al. 2022 (mixed ghost clipping); Opacus,
``opacus/grad_sample/``.
"""

from dpaudit.mechanisms.models.grad_sample import (
                                                   conv,
                                                   embedding,
                                                   group_norm,
                                                   layer_norm,
                                                   linear,
                                                   parameter_free,
                                                   pooling,
)
from dpaudit.mechanisms.models.grad_sample.plan import LayerPlan, plan_layers, summed_losses
from dpaudit.mechanisms.models.grad_sample.registry import RULES, ClipParts, LayerRule, register_rule, rule_for
from dpaudit.mechanisms.models.grad_sample.traced import ModulePlan, module_plan, plan_model

__all__ = ["ClipParts", "LayerPlan", "LayerRule", "ModulePlan", "RULES", "conv", "embedding", "group_norm",
           "layer_norm", "linear", "module_plan", "parameter_free", "plan_layers", "plan_model", "pooling",
           "register_rule", "rule_for", "summed_losses"]
