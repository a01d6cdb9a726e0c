"""Adapters for the DP libraries people ship: diffprivlib, OpenDP, python-dp, Opacus and jax_privacy.

Each ``from_*`` function turns a library object (plus a query) into a
dpaudit mechanism whose claim is read from the object. Nothing is imported
until an adapter is used; the libraries come with ``pip install
'dpaudit[libraries]'`` (Opacus with ``dpaudit[models]``, jax_privacy with ``dpaudit[jax]``).

>>> from diffprivlib.mechanisms import Laplace                       # doctest: +SKIP
>>> from dpaudit.mechanisms.adapters import from_diffprivlib           # doctest: +SKIP
>>> mech = from_diffprivlib(Laplace(epsilon=1.0, sensitivity=1.0))     # doctest: +SKIP
>>> dpaudit.audit(mech, dataset_pair=mech.neighbours(), score="float-bits").verdict  # doctest: +SKIP
'violation'
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["from_diffprivlib", "from_jax_privacy", "from_opacus", "from_opendp", "from_pydp", "from_recipe"]

_MODULES = {"from_diffprivlib": "diffprivlib", "from_opendp": "opendp", "from_pydp": "pydp",
            "from_opacus": "opacus", "from_jax_privacy": "jax_privacy",
            "from_recipe": "base"}  # a library object that does not pickle, built again in each worker


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'dpaudit.mechanisms.adapters' has no attribute {name!r}")
    return getattr(importlib.import_module(f"dpaudit.mechanisms.adapters.{module}"), name)
