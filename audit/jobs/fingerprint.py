"""Fingerprints of the code that produced an audit's outputs.

An audit's identity (and so which stored chunks it may reuse) includes a
fingerprint of the code: dpaudit's own source for built-in mechanisms, plus
the source of any module outside dpaudit that defines a mechanism class in
use, plus, for ``from_callable``, the function's bytecode, constants,
closure and module source, plus any data a parameter names (``fingerprint_data``:
a dp-mf strategy read from a file). Changing any of these changes the audit id,
so a changed mechanism never reuses a stored chunk.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import sys
import types
from pathlib import Path
from typing import Any

from dpaudit import __version__

__all__ = ["code_fingerprint", "code_version", "object_fingerprint", "package_fingerprint"]

_SUBPACKAGES = ("dpaudit", "dpaudit.mechanisms", "dpaudit.attacks", "dpaudit.auditing", "dpaudit.reports")


def code_version() -> str:
    """The dpaudit version (recorded in every result next to the fingerprint)."""
    return __version__


@functools.lru_cache(maxsize=1)
def package_fingerprint() -> str:
    """SHA-256 of every ``.py`` file of the installed dpaudit, in a fixed order."""
    digest = hashlib.sha256()
    for name in _SUBPACKAGES:
        package = importlib.import_module(name)
        for root in package.__path__:
            base = Path(root)
            files = base.glob("*.py") if name == "dpaudit" else base.rglob("*.py")
            for path in sorted(files):
                digest.update(f"{name}/{path.relative_to(base).as_posix()}\0".encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()


def _module_source(module_name: str) -> bytes:
    module = sys.modules.get(module_name)
    if module is None:
        return module_name.encode()
    try:
        return inspect.getsource(module).encode()
    except (OSError, TypeError):  # built-in or interactive: the name is all there is
        return module_name.encode()


def _code_bytes(code: types.CodeType, seen: set[int]) -> bytes:
    """Bytecode, names and constants of ``code`` and of the code objects it contains."""
    if id(code) in seen:
        return b""
    seen.add(id(code))
    parts = [code.co_code, repr(code.co_names).encode(), repr(code.co_varnames).encode()]
    for constant in code.co_consts:
        parts.append(_code_bytes(constant, seen) if isinstance(constant, types.CodeType) else repr(constant).encode())
    return b"\0".join(parts)


def _function_bytes(fn: Any) -> bytes:
    fn = getattr(fn, "__wrapped__", fn)  # a factory named in a config (mechanisms.models.user_model)
    target = getattr(fn, "__func__", fn)
    code = getattr(target, "__code__", None)
    if code is None:
        if isinstance(fn, functools.partial):  # the function and the arguments it is bound to
            return b"\0".join([_function_bytes(fn.func), repr(fn.args).encode(), repr(sorted(fn.keywords.items())).encode()])
        if isinstance(fn, type):  # a class (a model's): the source of its module
            return repr(fn).encode() + _module_source(fn.__module__)
        call = getattr(type(fn), "__call__", None)  # a callable object: its class's __call__, where it has code
        has_code = getattr(getattr(call, "__func__", call), "__code__", None) is not None
        return repr(type(fn)).encode() + (_function_bytes(call) if has_code else b"")
    parts = [_code_bytes(code, set()), _module_source(getattr(target, "__module__", "") or "")]
    for cell in getattr(target, "__closure__", None) or ():
        try:
            parts.append(repr(cell.cell_contents).encode())
        except ValueError:  # an empty cell
            parts.append(b"<empty>")
    return b"\0".join(parts)


def code_fingerprint(mechanism: Any) -> str:
    """The fingerprint of the code behind ``mechanism`` (hex SHA-256, 16 characters).

    Parameters
    ----------
    mechanism : Mechanism
        A built-in mechanism, a user subclass, or a ``from_callable`` wrapper.
    """
    digest = hashlib.sha256(package_fingerprint().encode())
    for cls in type(mechanism).__mro__:
        module = getattr(cls, "__module__", "") or ""
        if module.split(".")[0] not in ("dpaudit", "builtins", "abc"):
            digest.update(_module_source(module))
    fn = mechanism.user_function
    if fn is not None:
        digest.update(_function_bytes(fn))
    digest.update(mechanism.fingerprint_data)
    return digest.hexdigest()[:16]


def object_fingerprint(value: Any) -> str:
    """The fingerprint of a user object's code (its class's module source, or a function's bytecode)."""
    digest = hashlib.sha256()
    if callable(value) and hasattr(value, "__code__"):
        digest.update(_function_bytes(value))
    for cls in type(value).__mro__:
        module = getattr(cls, "__module__", "") or ""
        if module.split(".")[0] not in ("dpaudit", "builtins", "abc", "typing"):
            digest.update(f"{module}.{cls.__qualname__}".encode())
            digest.update(_module_source(module))
    return digest.hexdigest()[:16]
