"""No import circle between the package's modules, and the package front stays callable and light.

The walk reads every ``import`` of every module (AST, imports inside functions
included; ``if TYPE_CHECKING:`` blocks excluded, they never run) and looks for a
strongly connected component of more than one module.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.package.test_layers import ROOT, package_modules, runs  # one walk of the modules, shared


def imported_modules(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules that module ``name`` (at ``path``) imports anywhere in its code."""
    found = set()
    for node in runs(ast.parse(path.read_text(encoding="utf-8"))):
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


def test_dpaudit_audit_is_the_function_whatever_is_imported(tmp_path):
    """``audit/`` installs as ``dpaudit.auditing``: importing any of its modules never rebinds ``dpaudit.audit``."""
    code = ("import sys, dpaudit, dpaudit.auditing\n"
            "assert 'torch' not in sys.modules\n"
            "from dpaudit.auditing.checks.api import audit\n"
            "import dpaudit.auditing.jobs.runner\n"
            "assert dpaudit.audit is audit and callable(dpaudit.audit)\n"
            "from dpaudit import assert_private, PrivacyViolation\n"
            "assert assert_private.__module__ == 'dpaudit.auditing.checks.regression'\n")
    # in an empty folder: a checkout named dpaudit would shadow the installed package from its parent
    result = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c", code], capture_output=True,
                            text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
