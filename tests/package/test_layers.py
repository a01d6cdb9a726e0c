"""The data path, enforced: mechanisms <- attacks <- audit <- reports <- the root package (CLI, gallery).

A module may import from its own layer and the layers below it, never above
(an AST walk over every import, including imports inside functions).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS = {"mechanisms": 0, "attacks": 1, "audit": 2, "reports": 3, "dpaudit": 4}
FOLDERS = {"mechanisms": ROOT / "mechanisms", "attacks": ROOT / "attacks", "audit": ROOT / "audit",
           "reports": ROOT / "reports", "dpaudit": ROOT / "dpaudit"}


def _layer_of_import(name: str) -> int | None:
    parts = name.split(".")
    if parts[0] != "dpaudit":
        return None
    if len(parts) == 1 or parts[1] not in LAYERS:
        return LAYERS["dpaudit"]
    return LAYERS[parts[1]]


def imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every absolute import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "dpaudit":  # from dpaudit import mechanisms: the subpackage is what is imported
                found.extend((node.lineno, f"dpaudit.{alias.name}") for alias in node.names
                             if not alias.name.startswith("__"))  # __version__ is metadata, not a layer
            else:
                found.append((node.lineno, node.module))
    return found


def _violations() -> list[str]:
    bad = []
    for folder, directory in FOLDERS.items():
        own = LAYERS[folder]
        for path in sorted(directory.rglob("*.py")):
            for line, module in imports(path):
                top = module.split(".")[0]
                if top in ("mechanisms", "attacks", "audit", "reports"):
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports the bare top-level name {module!r}")
                layer = _layer_of_import(module)
                if layer is not None and layer > own:
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {module} (a layer above {folder})")
    return bad


def test_no_back_edges_and_no_bare_top_level_imports():
    assert _violations() == []


def test_the_check_sees_a_back_edge(tmp_path):
    # the walker must catch imports inside functions too, or the test above could not fail
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from dpaudit.reports.render import render\n    import mechanisms.base\n")
    assert [module for _, module in imports(probe)] == ["dpaudit.reports.render", "mechanisms.base"]
    assert _layer_of_import("dpaudit.reports.render") == 3 > LAYERS["mechanisms"]


def test_importing_changes_no_global_state():
    """Importing every subpackage registers no mechanism and switches no matplotlib backend."""
    import subprocess
    import sys

    code = (
        "import matplotlib; before = matplotlib.get_backend()\n"
        "from dpaudit.mechanisms import registered; names = set(registered())\n"
        "import importlib\n"
        "for module in ('dpaudit', 'dpaudit.attacks', 'dpaudit.audit', 'dpaudit.reports', 'dpaudit.auditing.checks.zoo',\n"
        "               'dpaudit.reports.plots', 'dpaudit.reports.html', 'dpaudit.gallery', 'dpaudit.cli'):\n"
        "    importlib.import_module(module)\n"
        "assert set(registered()) == names, set(registered()) - names\n"
        "assert matplotlib.get_backend() == before, (before, matplotlib.get_backend())\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT.parent)


CONCRETE = {"baseline", "kernels", "sgd", "dpsgd", "lssgd", "shuffle", "wrapped", "models"}


def test_attacks_and_accounting_never_import_a_concrete_mechanism():
    """Mechanisms describe themselves: the attack side and the accountants see only the base class."""
    bad = []
    for directory in (ROOT / "attacks", ROOT / "mechanisms" / "accounting"):
        for path in sorted(directory.rglob("*.py")):
            for line, module in imports(path):
                parts = module.split(".")
                if parts[:2] == ["dpaudit", "mechanisms"] and len(parts) > 2 and parts[2] in CONCRETE:
                    bad.append(f"{path.relative_to(ROOT)}:{line} imports {module}")
            text = path.read_text(encoding="utf-8")
            for needle in ("mechanism.name ==", "mech.name ==", "mechanism.name in", "mech.name in"):
                if needle in text:
                    bad.append(f"{path.relative_to(ROOT)} branches on a mechanism's name ({needle!r})")
    assert bad == []


#: Hooks that were once looked up with getattr; every one is now declared on the base class.
HOOKS = {"log_likelihood_ratio", "record_score", "label", "dtype", "steps", "dim", "zero_input_is_absent", "fn",
         "zero_record_is_absent"}


def capability_lookups(path: Path) -> list[str]:
    """``getattr``/``hasattr`` calls in ``path`` that look a mechanism capability up by name.

    A lookup counts when its object is spelt like a mechanism (``mechanism``, ``mech``,
    ``pair.mechanism``, ...) or its attribute is a member of the mechanism contract or a known hook.
    """
    from dpaudit.mechanisms.base import Mechanism

    contract = {name for name in dir(Mechanism) if not name.startswith("__")} | HOOKS
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2):
            continue
        target, attribute = ast.unparse(node.args[0]), node.args[1]
        named = attribute.value if isinstance(attribute, ast.Constant) and isinstance(attribute.value, str) else None
        if "mech" in target.lower() or (named in contract and named not in ("name", "params", "summary")):
            found.append(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name}:{node.lineno} "
                         f"{ast.unparse(node)}")
    return found


def test_no_getattr_lookup_of_a_mechanism_capability_above_mechanisms():
    """Every capability another layer asks of a mechanism is declared on the base class (issue 22)."""
    bad = []
    for folder in ("attacks", "audit", "reports", "dpaudit"):
        for path in sorted(FOLDERS[folder].rglob("*.py")):
            bad.extend(capability_lookups(path))
    assert bad == []


def test_the_capability_check_sees_a_lookup(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f(pair, thing):\n    a = getattr(pair.mechanism, 'record_score', None)\n"
                     "    b = getattr(thing, 'log_likelihood_ratio', None)\n    c = getattr(thing, 'colour', 1)\n")
    assert [line.split(" ", 1)[1] for line in capability_lookups(probe)] == [
        "getattr(pair.mechanism, 'record_score', None)", "getattr(thing, 'log_likelihood_ratio', None)"]


def test_the_contract_declares_every_hook():
    from dpaudit.mechanisms.base import Mechanism

    assert HOOKS - {"dtype", "steps", "dim", "fn"} <= set(dir(Mechanism))
    # dtype, steps, dim and fn are parameters of some mechanisms; the base declares what other layers need
    assert {"iterations", "size_parameter", "user_function", "release_grid"} <= set(dir(Mechanism))
