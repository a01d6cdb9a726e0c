"""No import circle between the package's modules, and every old import path of audit/ still works and warns.

The walk reads every ``import`` of every module (AST, imports inside functions
included; ``if TYPE_CHECKING:`` blocks excluded, they never run) and looks for a
strongly connected component of more than one module.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from dpaudit.auditing._moved import MOVED
from tests.package.test_layers import ROOT

#: Import package -> source folder (the package-dir mapping of pyproject.toml).
PACKAGES = {"dpaudit": ROOT / "dpaudit", "dpaudit.mechanisms": ROOT / "mechanisms", "dpaudit.attacks": ROOT / "attacks",
            "dpaudit.auditing": ROOT / "audit", "dpaudit.reports": ROOT / "reports"}


def package_modules() -> dict[str, Path]:
    """Every module of the package, by its dotted name."""
    modules = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
    return modules


def _runs(tree: ast.Module) -> list[ast.AST]:
    """The nodes of ``tree`` that can run: everything but the bodies of ``if TYPE_CHECKING:``."""
    found, pending = [], [tree]
    while pending:
        node = pending.pop()
        found.append(node)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            pending.extend(node.orelse)
        else:
            pending.extend(ast.iter_child_nodes(node))
    return found


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules that module ``name`` (at ``path``) imports anywhere in its code."""
    found = set()
    for node in _runs(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the module's package, up level - 1 packages
                package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                package = package[:len(package) - node.level + 1]
                base = ".".join(package + ([node.module] if node.module else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"  # from a.b import c: the module a.b.c, or a name of a.b
                if target in modules:
                    found.add(target)
                elif base in modules:
                    found.add(base)
    found.discard(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = package_modules()
    return {name: imported_modules(name, path, modules) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle_in_the_package():
    graph = import_graph()
    assert len(graph) > 100 and "dpaudit.auditing.jobs.runner" in graph  # the walk saw the package
    assert circles(graph) == []


def test_the_walk_sees_a_circle_through_a_function_level_import(tmp_path):
    # the test above could not fail if the walker missed imports inside functions or relative imports
    folder = tmp_path / "pkg"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "a.py").write_text("from pkg import b\n")
    (folder / "b.py").write_text("def f():\n    from . import c\n")
    (folder / "c.py").write_text("import typing\nif typing.TYPE_CHECKING:\n    import pkg.b\ndef g():\n"
                                 "    from pkg.a import name\n")
    modules = {"pkg": folder / "__init__.py", **{f"pkg.{m}": folder / f"{m}.py" for m in "abc"}}
    graph = {name: imported_modules(name, path, modules) for name, path in modules.items()}
    assert graph == {"pkg": set(), "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.c"}, "pkg.c": {"pkg.a"}}
    assert circles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
    assert circles({"x": {"y"}, "y": set()}) == []


def test_every_moved_module_exists_at_its_new_path():
    modules = package_modules()
    assert set(MOVED.values()) <= set(modules)
    # an old path that is a file again would never run: the finder answers for that name first
    assert not set(MOVED) & set(modules)
    assert {"dpaudit.auditing.statistics", "dpaudit.auditing.jobs", "dpaudit.auditing.checks"} <= set(modules)


_OLD_PATHS = (
    "import warnings, importlib, sys\n"
    "from dpaudit.auditing._moved import MOVED\n"
    "for old, new in sorted(MOVED.items()):\n"
    "    with warnings.catch_warnings(record=True) as caught:\n"
    "        warnings.simplefilter('always')\n"
    "        module = importlib.import_module(old)\n"
    "    assert module is importlib.import_module(new) and module.__name__ == new, old\n"
    "    assert module.__spec__.name == new, (old, module.__spec__.name)\n"
    "    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]\n"
    "    assert any(old in m and new in m for m in messages), (old, messages)\n"
    "print('ok', len(MOVED))\n"
)


def test_every_old_import_path_works_and_warns():
    """Each old path gives the new module object itself, after a DeprecationWarning naming the new path."""
    # a fresh interpreter: in this one the old names may already be imported (and warn no more)
    result = subprocess.run([sys.executable, "-c", _OLD_PATHS], capture_output=True, text=True, cwd=ROOT.parent)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["ok", str(len(MOVED))]


@pytest.mark.parametrize("statement, name", [
    ("from dpaudit.auditing import config", "config"),
    ("import dpaudit.auditing; dpaudit.auditing.verdict", "verdict"),
    ("from dpaudit.auditing.zoo import VARIANTS", "zoo"),
    ("from dpaudit.auditing.estimators import plan_epsilon", "estimators"),
])
def test_old_spellings_warn_and_name_the_new_path(statement, name):
    code = (f"import warnings\nwarnings.simplefilter('error', DeprecationWarning)\ntry:\n    {statement}\n"
            "except DeprecationWarning as w:\n    print(w)\nelse:\n    print('no warning')\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT.parent)
    assert result.returncode == 0, result.stderr
    old = f"dpaudit.auditing.{name}"
    assert result.stdout.strip() == f"{old} has moved to {MOVED[old]}; import it from there"


def test_patching_an_old_path_patches_the_module_in_use():
    import warnings
    from unittest import mock

    import dpaudit.auditing.jobs.store as store

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the warning itself is tested above
        with mock.patch("dpaudit.auditing.store.MEMORY", "patched"):
            assert store.MEMORY == "patched"
    assert store.MEMORY == ":memory:"


def test_the_package_stays_callable_and_light():
    code = ("import sys, dpaudit, dpaudit.audit\n"
            "assert callable(dpaudit.audit) and 'torch' not in sys.modules\n"
            "from dpaudit.auditing import assert_private, PrivacyViolation\n"
            "from dpaudit.auditing.jobs.api import audit\n"
            "assert assert_private.__module__ == 'dpaudit.auditing.checks.regression'\n")
    result = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code], capture_output=True,
                            text=True, cwd=ROOT.parent)
    assert result.returncode == 0, result.stderr
