"""A user's model factory named in a config as ``model = "file.py:factory"``.

:class:`UserModel` is the written reference (a ``str``, so results and audit
ids record it as written) that also calls the factory it names. It carries
the reference, never the loaded module: pickled into a worker process (joblib
or Dask), it loads the file again there, so a factory defined in a file of
the user's works wherever the file can be read at the same path. The factory
itself is exposed as ``__wrapped__``, which the audit's fingerprint follows
(:mod:`dpaudit.auditing.jobs.fingerprint`): a changed file changes the audit id.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from dpaudit.core.errors import ParameterError
from dpaudit.mechanisms.user_code import load_object

__all__ = ["UserModel", "load_user_model"]


class UserModel(str):
    """``file.py:factory`` as written, callable as the factory ``factory(features, classes)``.

    Every error names the parameter ``model`` and the value as written.
    """

    __wrapped__: Any
    base: str

    def __call__(self, features: int, classes: int) -> torch.nn.Module:
        model = self.__wrapped__(features, classes)
        if not isinstance(model, torch.nn.Module):
            raise ParameterError(f"model: {str(self)!r} returned a {type(model).__name__}, not a torch.nn.Module "
                                 f"(model={str(self)!r})")
        return model

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return load_user_model, (str(self), self.base)

    def __copy__(self) -> "UserModel":
        return self

    def __deepcopy__(self, memo: dict) -> "UserModel":
        return self


def load_user_model(spec: str, base: str | Path | None = None) -> UserModel:
    """The :class:`UserModel` that ``spec`` names, a relative file taken from ``base`` (a config's folder).

    Parameters
    ----------
    spec : str
        ``path/to/file.py:factory`` or ``package.module:factory``; the factory takes
        ``(features, classes)`` and returns a ``torch.nn.Module``.
    base : str or pathlib.Path, optional
        The folder a relative path is resolved against (default: the working directory).

    Raises
    ------
    ParameterError
        Naming ``model`` and the value, for a missing file or name, or a name that is not callable.
    """
    factory = load_object(spec, parameter="model", base=base)
    if not callable(factory):
        raise ParameterError(f"model: {spec!r} names a {type(factory).__name__}, not a factory function "
                             f"(model={spec!r})")
    model = UserModel(spec)
    model.__wrapped__ = factory
    model.__qualname__ = str(spec)  # how ModelTraining.params names a factory
    model.base = str(Path(base).resolve()) if base is not None else str(Path.cwd())
    return model
