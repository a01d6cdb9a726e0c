"""Mechanisms: batched samplers of private algorithms and their privacy claims.

>>> from mechanisms import make
>>> mech = make("pnsgd", n=100, dim=10, eta=0.1, sigma=1.0)
>>> mech.sample(trials=1000, seed=0).shape
(1000, 10)
"""

from dpaudit.mechanisms import baseline, dpsgd, kernels, lssgd, sgd, shuffle  # noqa: F401  (registration)
from dpaudit.mechanisms.base import Mechanism, describe, make, registered, make_rng
from dpaudit.mechanisms.dataset import Dataset, as_dataset
from dpaudit.mechanisms.errors import DPAuditError, ParameterError
from dpaudit.mechanisms.wrapped import CallableMechanism, from_callable

__all__ = [
    "CallableMechanism",
    "DPAuditError",
    "Dataset",
    "Mechanism",
    "ParameterError",
    "as_dataset",
    "describe",
    "from_callable",
    "make",
    "registered",
    "make_rng",
]
