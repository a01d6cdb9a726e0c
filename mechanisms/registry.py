"""The registry of mechanism classes: ``register``, ``registered``, ``make``, ``describe``.

The built-in mechanisms are imported (and so registered) on the registry's
first use, not when the package is imported.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from dpaudit.core.errors import ParameterError
from dpaudit.core.validation import check_choice, suggestion

if TYPE_CHECKING:
    from dpaudit.mechanisms.base import Mechanism

__all__ = ["BUILTIN_MODULES", "ParamInfo", "describe", "make", "register", "registered"]

_REGISTRY: dict[str, type["Mechanism"]] = {}
M = TypeVar("M", bound=type["Mechanism"])


def register(cls: M) -> M:
    """Class decorator adding a mechanism to the registry under ``cls.name``.

    Raises
    ------
    ValueError
        If the name is empty or already taken (no silent overwrite).
    """
    if not cls.name:
        raise ValueError(f"{cls.__qualname__} has no name")
    if cls.name in _REGISTRY:
        raise ValueError(f"a mechanism named {cls.name!r} is already registered")
    _REGISTRY[cls.name] = cls
    return cls


#: Modules of the built-in mechanisms, imported (and so registered) on first use of the registry.
BUILTIN_MODULES = ("baseline", "dpmf", "dpsgd", "kernels", "lssgd", "sgd", "shuffle", "models.mechanism")


def _load_builtins() -> None:
    for module in BUILTIN_MODULES:
        importlib.import_module(f"dpaudit.mechanisms.{module}")


def registered() -> Mapping[str, type[Mechanism]]:
    """The registered mechanism classes by name (read-only view)."""
    _load_builtins()
    return dict(_REGISTRY)


def make(name: str, /, **params: Any) -> Mechanism:
    """Build the registered mechanism ``name`` with ``params``.

    Raises
    ------
    ParameterError
        For an unknown name (the error lists the valid ones), an unknown
        parameter, or an invalid value.
    """
    _load_builtins()
    check_choice("mechanism", name, sorted(_REGISTRY))
    cls = _REGISTRY[name]
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(params) - known)
    if unknown:
        raise ParameterError(
            f"unknown parameter {unknown[0]!r} for mechanism {name!r}; "
            f"valid parameters: {', '.join(sorted(known))}{suggestion(unknown[0], known)}")
    missing = [f.name for f in dataclasses.fields(cls)
               if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
               and f.name not in params]
    if missing:
        raise ParameterError(f"mechanism {name!r} needs parameter {missing[0]!r}")
    mechanism = cls(**params)
    defaults = {f.name: f.default for f in dataclasses.fields(cls)}
    for key, reason in mechanism.inapplicable().items():
        value = params.get(key)
        if key in params and value is not None and value != defaults[key]:
            raise ParameterError(f"parameter {key!r} does not apply to mechanism {name!r} here ({reason}), "
                                 f"got {key}={value!r}")
    return mechanism


@dataclasses.dataclass(frozen=True, slots=True)
class ParamInfo:
    """Description of one mechanism parameter, for ``dpaudit list``."""

    name: str
    default: Any
    required: bool
    doc: str


def describe(cls: type[Mechanism]) -> list[ParamInfo]:
    """The documented parameters of a mechanism class."""
    infos = []
    for field in dataclasses.fields(cls):
        required = field.default is dataclasses.MISSING
        default = None if required else field.default
        if isinstance(default, tuple):
            default = list(default)
        infos.append(ParamInfo(field.name, default, required, field.metadata.get("doc", "")))
    return infos

