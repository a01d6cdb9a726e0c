"""Load a user's object named as ``path/to/file.py:name`` or ``package.module:name``.

One loader serves every place a user names code of their own: a function to
search (``dpaudit search --function``), a model factory or a loss in a
config. A file path is resolved against ``base`` (the config file's folder)
when it is relative. The loaded module is kept in :data:`sys.modules` under a
name derived from its resolved path, so the audit's fingerprint
(:mod:`dpaudit.auditing.jobs.fingerprint`) reads its source, and a changed file
changes the audit's identity.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import sys
from pathlib import Path
from typing import Any

from dpaudit.core.errors import ParameterError

__all__ = ["UserCode", "load_object", "parse_spec"]


class UserCode(str):
    """A ``file.py:name`` or ``module:name`` reference, kept as written (a ``str``)."""


def parse_spec(spec: object, *, parameter: str) -> tuple[str, str]:
    """``(source, name)`` of ``spec``; a clear error naming ``parameter`` otherwise."""
    if not isinstance(spec, str):
        raise ParameterError(f"{parameter} must be a string 'FILE.py:NAME' or 'MODULE:NAME', "
                             f"got {parameter}={spec!r}")
    source, _, name = spec.rpartition(":")
    if not source or not name or not name.isidentifier():
        raise ParameterError(f"{parameter} must be 'FILE.py:NAME' or 'MODULE:NAME', got {parameter}={spec!r}")
    return source, name


def _module_from_file(path: Path, parameter: str, spec: str) -> Any:
    if not path.is_file():
        raise ParameterError(f"{parameter}: no such file {str(path)!r} ({parameter}={spec!r})")
    tag = hashlib.sha256(str(path).encode()).hexdigest()[:12]
    module_name = f"_dpaudit_user_{path.stem}_{tag}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    if module_spec is None or module_spec.loader is None:
        raise ParameterError(f"{parameter}: cannot load {str(path)!r} as Python ({parameter}={spec!r})")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[module_name] = module  # the fingerprint reads the module's source from here
    try:
        module_spec.loader.exec_module(module)
    except Exception as exc:  # the user's module failed to run: say where, keep the cause
        del sys.modules[module_name]
        raise ParameterError(f"{parameter}: importing {str(path)!r} failed: {type(exc).__name__}: {exc}") from exc
    return module


def load_object(spec: object, *, parameter: str, base: str | Path | None = None) -> Any:
    """The object ``spec`` names.

    Parameters
    ----------
    spec : str
        ``path/to/file.py:name`` (relative paths are taken from ``base``) or
        ``package.module:name``.
    parameter : str
        The name the user wrote ``spec`` under (``model``, ``loss``,
        ``--function``); every error names it and the value.
    base : str or pathlib.Path, optional
        The folder a relative file path is resolved against (a config file's
        folder); the working directory when omitted.

    Returns
    -------
    object
        The named attribute of the loaded module.

    Raises
    ------
    ParameterError
        For a malformed spec, a missing file or module, a module that fails to
        import, or a missing name.
    """
    source, name = parse_spec(spec, parameter=parameter)
    if source.endswith(".py"):
        path = Path(source).expanduser()
        if not path.is_absolute() and base is not None:
            path = Path(base) / path
        module = _module_from_file(path.resolve(), parameter, str(spec))
        where = str(path)
    else:
        try:
            module = importlib.import_module(source)
        except ImportError as exc:
            raise ParameterError(f"{parameter}: cannot import {source!r} ({parameter}={spec!r}): {exc}") from None
        where = source
    try:
        return getattr(module, name)
    except AttributeError:
        raise ParameterError(f"{parameter}: {where!r} has no name {name!r} ({parameter}={spec!r})") from None
