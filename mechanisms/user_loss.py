"""A loss of the user's own for dp-sgd, dp-lssgd and (multi-epoch) pnsgd: ``loss = "path/to/file.py:name"``.

The named object is a function ``gradient(w, record) -> gradients``: ``w`` is a
``(trials, d)`` tensor of iterates (one row per trial), ``record`` one record
of ``d`` numbers, and the result the ``(trials, d)`` gradients of that record's
loss at every trial's iterate, in one vectorised computation. DP-SGD and
PNSGD clip each record's gradient to norm ``L`` (``lipschitz``), so every
record moves a step by at most ``2 eta L`` (``/ m``) whatever the function does; the
composition claims hold for it, the claims that need a convex loss are
reported not applicable (docs/theory.md 10). The file is loaded with
:func:`dpaudit.mechanisms.user_code.load_object`; its source is part of the
audit's fingerprint (``Mechanism.user_function``).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.user_code import load_object, parse_spec

__all__ = ["USER_LOSS", "is_user_loss", "load_gradient", "user_gradients"]

USER_LOSS = "user"  #: ``Loss.name`` of a loss of the user's own
_PROBE_TRIALS = 2


def is_user_loss(name: Any) -> bool:
    """True when ``name`` names code (``FILE.py:NAME`` or ``MODULE:NAME``), not a built-in loss."""
    return isinstance(name, str) and ":" in name


def _file_state(spec: str) -> tuple:
    """What identifies the file's current contents (a changed file is loaded again)."""
    source, _ = parse_spec(spec, parameter="loss")
    path = Path(source).expanduser()
    if source.endswith(".py") and path.is_file():
        stat = path.stat()
        return (stat.st_mtime_ns, stat.st_size)
    return ()


def load_gradient(spec: str, dim: int, base: str | Path | None = None):
    """The user's gradient function, checked on a probe: it must return ``(trials, dim)`` finite numbers.

    Raises
    ------
    ParameterError
        Naming ``loss`` and the value: a missing file, no such name, not
        callable, or a result of the wrong shape.
    """
    if base is not None:  # relative to the config's folder: the same object as the absolute path names
        source, name = parse_spec(spec, parameter="loss")
        if source.endswith(".py") and not Path(source).expanduser().is_absolute():
            spec = f"{(Path(base) / source).resolve()}:{name}"
    return _load(spec, dim, _file_state(spec))


@functools.lru_cache(maxsize=32)
def _load(spec: str, dim: int, state: tuple):
    function = load_object(spec, parameter="loss")
    if not callable(function):
        raise ParameterError(f"loss: {spec!r} names a {type(function).__name__}, not a function "
                             f"gradient(w, record)")
    w = torch.zeros((_PROBE_TRIALS, dim), dtype=torch.float64)
    try:
        result = function(w, torch.zeros(dim, dtype=torch.float64))
    except Exception as exc:  # the user's function failed: say where, keep the cause
        raise ParameterError(f"loss: {spec!r} failed on iterates of shape {tuple(w.shape)} and one record: "
                             f"{type(exc).__name__}: {exc}") from exc
    shape = tuple(np.shape(result))
    if shape != (_PROBE_TRIALS, dim):
        raise ParameterError(f"loss: {spec!r} returned shape {shape} for iterates of shape {tuple(w.shape)}; it "
                             f"must return one gradient per trial, shape (trials, dim) = {(_PROBE_TRIALS, dim)}")
    return function


def user_gradients(function, w: torch.Tensor, records: torch.Tensor, lipschitz: float) -> torch.Tensor:
    """Every record's clipped gradient at every iterate, shape ``(trials, n, d)`` (one call per record)."""
    rows = []
    for record in records:
        gradient = torch.as_tensor(function(w, record), dtype=w.dtype)
        if gradient.shape != w.shape:
            raise ParameterError(f"loss returned shape {tuple(gradient.shape)} for iterates of shape "
                                 f"{tuple(w.shape)}; it must return shape (trials, dim)")
        rows.append(gradient)
    gradients = torch.stack(rows, dim=1)
    if not math.isfinite(lipschitz):
        return gradients
    norms = torch.linalg.vector_norm(gradients, dim=-1, keepdim=True)
    return gradients * torch.clamp(lipschitz / torch.clamp(norms, min=1e-300), max=1.0)
