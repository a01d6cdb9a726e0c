"""Mechanisms: batched samplers of private algorithms and their privacy claims.

>>> from dpaudit.mechanisms import make
>>> mech = make("pnsgd", n=100, dim=10, eta=0.1, sigma=1.0)
>>> mech.sample(trials=1000, seed=0).shape
(1000, 10)

Names are imported on first use (PEP 562), so ``import dpaudit.core.errors``
(the command line's start-up) does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from dpaudit.core.errors import DPAuditError, ParameterError

_LAZY = {
    "CallableMechanism": "wrapped", "from_callable": "wrapped", "BatchedCallableMechanism": "wrapped",
    "from_batched_callable": "wrapped", "Dataset": "dataset", "as_dataset": "dataset",
    "Mechanism": "base", "describe": "base", "make": "base", "registered": "base", "make_rng": "base",
}

__all__ = [
    "BatchedCallableMechanism",
    "CallableMechanism",
    "DPAuditError",
    "Dataset",
    "Mechanism",
    "ParameterError",
    "as_dataset",
    "describe",
    "from_batched_callable",
    "from_callable",
    "make",
    "registered",
    "make_rng",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f"dpaudit.mechanisms.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dpaudit.mechanisms' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
