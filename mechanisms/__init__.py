"""Mechanisms: batched samplers of private algorithms and their privacy claims.

>>> from dpaudit.mechanisms import make
>>> mech = make("pnsgd", n=100, dim=10, eta=0.1, sigma=1.0)
>>> mech.sample(trials=1000, seed=0).shape
(1000, 10)

Names are imported on first use (PEP 562), so importing the package does not
import torch. The errors mechanisms raise live in the base room
(:mod:`dpaudit.core.errors`, public as ``dpaudit.ParameterError``).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "CallableMechanism": "wrapped", "from_callable": "wrapped", "BatchedCallableMechanism": "wrapped",
    "from_batched_callable": "wrapped", "Dataset": "dataset", "as_dataset": "dataset",
    "Mechanism": "base", "make_rng": "base", "describe": "registry", "make": "registry", "registered": "registry",
}

__all__ = [
    "BatchedCallableMechanism",
    "CallableMechanism",
    "Dataset",
    "Mechanism",
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
