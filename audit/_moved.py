"""Old import paths of the modules that moved into ``statistics``, ``jobs`` and ``checks``.

``dpaudit.auditing.config`` is now ``dpaudit.auditing.jobs.config``, and so on
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
    "dpaudit.auditing.budget": "dpaudit.auditing.statistics.budget",
    "dpaudit.auditing.ceiling": "dpaudit.auditing.statistics.ceiling",
    "dpaudit.auditing.certify": "dpaudit.auditing.statistics.certify",
    "dpaudit.auditing.conditional": "dpaudit.auditing.statistics.conditional",
    "dpaudit.auditing.confidence": "dpaudit.auditing.statistics.confidence",
    "dpaudit.auditing.estimators": "dpaudit.auditing.statistics.estimators",
    "dpaudit.auditing.one_run": "dpaudit.auditing.statistics.one_run",
    "dpaudit.auditing.one_run_fdp": "dpaudit.auditing.statistics.one_run_fdp",
    "dpaudit.auditing.portfolio": "dpaudit.auditing.statistics.portfolio",
    "dpaudit.auditing.sequential": "dpaudit.auditing.statistics.sequential",
    "dpaudit.auditing.thresholds": "dpaudit.auditing.statistics.thresholds",
    "dpaudit.auditing.api": "dpaudit.auditing.jobs.api",
    "dpaudit.auditing.assemble": "dpaudit.auditing.jobs.assemble",
    "dpaudit.auditing.config": "dpaudit.auditing.jobs.config",
    "dpaudit.auditing.fingerprint": "dpaudit.auditing.jobs.fingerprint",
    "dpaudit.auditing.job": "dpaudit.auditing.jobs.job",
    "dpaudit.auditing.result": "dpaudit.auditing.jobs.result",
    "dpaudit.auditing.runner": "dpaudit.auditing.jobs.runner",
    "dpaudit.auditing.store": "dpaudit.auditing.jobs.store",
    "dpaudit.auditing.store_source": "dpaudit.auditing.jobs.store_source",
    "dpaudit.auditing.streaming": "dpaudit.auditing.jobs.streaming",
    "dpaudit.auditing.pytest_plugin": "dpaudit.auditing.checks.pytest_plugin",
    "dpaudit.auditing.regression": "dpaudit.auditing.checks.regression",
    "dpaudit.auditing.search": "dpaudit.auditing.checks.search",
    "dpaudit.auditing.verdict": "dpaudit.auditing.checks.verdict",
    "dpaudit.auditing.zoo": "dpaudit.auditing.checks.zoo",
    "dpaudit.auditing.zoo.broken": "dpaudit.auditing.checks.zoo.broken",
    "dpaudit.auditing.zoo.realworld": "dpaudit.auditing.checks.zoo.realworld",
    "dpaudit.auditing.zoo.runner": "dpaudit.auditing.checks.zoo.runner",
    "dpaudit.auditing.zoo.variants": "dpaudit.auditing.checks.zoo.variants",
}


def moved_module(old: str) -> types.ModuleType:
    """The module now at ``MOVED[old]``, after a deprecation warning naming that path.

    Called by :class:`MovedFinder` and by ``dpaudit.auditing.__getattr__``; the warning
    points at their caller's line (the import machinery's own frames are skipped).
    """
    warnings.warn(f"{old} has moved to {MOVED[old]}; import it from there", DeprecationWarning, stacklevel=3)
    return importlib.import_module(MOVED[old])


class MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path of :data:`MOVED` and loads it as the module at its new path."""

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self, is_package=fullname == "dpaudit.auditing.zoo")

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
