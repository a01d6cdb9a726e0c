"""Old import paths of the modules that moved into ``statistics``, ``jobs`` and ``checks``.

``dpaudit.audit.config`` is now ``dpaudit.audit.jobs.config``, and so on
(:data:`MOVED`). Importing an old path still works: :class:`MovedFinder`
(installed by ``dpaudit.audit``) warns with a :class:`DeprecationWarning`
naming the new path and hands back the new module itself, so both names are
one module object (``mock.patch`` on an old path patches the real module).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings
from importlib.machinery import ModuleSpec

__all__ = ["MOVED", "MovedFinder", "install", "moved_module"]

#: Old module path -> new module path.
MOVED: dict[str, str] = {
    "dpaudit.audit.budget": "dpaudit.audit.statistics.budget",
    "dpaudit.audit.ceiling": "dpaudit.audit.statistics.ceiling",
    "dpaudit.audit.certify": "dpaudit.audit.statistics.certify",
    "dpaudit.audit.conditional": "dpaudit.audit.statistics.conditional",
    "dpaudit.audit.confidence": "dpaudit.audit.statistics.confidence",
    "dpaudit.audit.estimators": "dpaudit.audit.statistics.estimators",
    "dpaudit.audit.one_run": "dpaudit.audit.statistics.one_run",
    "dpaudit.audit.one_run_fdp": "dpaudit.audit.statistics.one_run_fdp",
    "dpaudit.audit.portfolio": "dpaudit.audit.statistics.portfolio",
    "dpaudit.audit.sequential": "dpaudit.audit.statistics.sequential",
    "dpaudit.audit.thresholds": "dpaudit.audit.statistics.thresholds",
    "dpaudit.audit.api": "dpaudit.audit.jobs.api",
    "dpaudit.audit.assemble": "dpaudit.audit.jobs.assemble",
    "dpaudit.audit.config": "dpaudit.audit.jobs.config",
    "dpaudit.audit.fingerprint": "dpaudit.audit.jobs.fingerprint",
    "dpaudit.audit.job": "dpaudit.audit.jobs.job",
    "dpaudit.audit.result": "dpaudit.audit.jobs.result",
    "dpaudit.audit.runner": "dpaudit.audit.jobs.runner",
    "dpaudit.audit.store": "dpaudit.audit.jobs.store",
    "dpaudit.audit.store_source": "dpaudit.audit.jobs.store_source",
    "dpaudit.audit.streaming": "dpaudit.audit.jobs.streaming",
    "dpaudit.audit.pytest_plugin": "dpaudit.audit.checks.pytest_plugin",
    "dpaudit.audit.regression": "dpaudit.audit.checks.regression",
    "dpaudit.audit.search": "dpaudit.audit.checks.search",
    "dpaudit.audit.verdict": "dpaudit.audit.checks.verdict",
    "dpaudit.audit.zoo": "dpaudit.audit.checks.zoo",
    "dpaudit.audit.zoo.broken": "dpaudit.audit.checks.zoo.broken",
    "dpaudit.audit.zoo.realworld": "dpaudit.audit.checks.zoo.realworld",
    "dpaudit.audit.zoo.runner": "dpaudit.audit.checks.zoo.runner",
    "dpaudit.audit.zoo.variants": "dpaudit.audit.checks.zoo.variants",
}


def moved_module(old: str) -> types.ModuleType:
    """The module now at ``MOVED[old]``, after a deprecation warning naming that path.

    Called by :class:`MovedFinder` and by ``dpaudit.audit.__getattr__``; the warning
    points at their caller's line (the import machinery's own frames are skipped).
    """
    warnings.warn(f"{old} has moved to {MOVED[old]}; import it from there", DeprecationWarning, stacklevel=3)
    return importlib.import_module(MOVED[old])


class MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path of :data:`MOVED` and loads it as the module at its new path."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=fullname == "dpaudit.audit.zoo")

    def create_module(self, spec: ModuleSpec) -> types.ModuleType:
        module = moved_module(spec.name)
        spec.loader_state = module.__spec__  # the import system sets the old spec on the module next
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        # the module is already executed under its new name; it keeps its own spec
        module.__spec__ = module.__spec__.loader_state


def install() -> None:
    """Put one :class:`MovedFinder` first on ``sys.meta_path`` (before the path finder sees the old name)."""
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())
