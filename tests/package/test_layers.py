"""The data path, enforced room by room: a module imports its own room and the rooms below it, never above.

Rooms are the package's folders, in one order from the base room up
(:data:`ROOMS`; docs/design.md draws the map). The walk reads every import of
every module, imports inside functions included (an AST walk), and each
import inside a function must say in a comment why it is not at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Import package -> source folder (the package-dir mapping of pyproject.toml).
FOLDERS = {"dpaudit": ROOT / "dpaudit", "dpaudit.mechanisms": ROOT / "mechanisms", "dpaudit.attacks": ROOT / "attacks",
           "dpaudit.auditing": ROOT / "audit", "dpaudit.reports": ROOT / "reports"}
#: Every room, lowest first. A module's room is the longest entry that prefixes its dotted name.
ROOMS = (
    "dpaudit.core",                            # errors, parameter checks, closed vocabularies
    "dpaudit.mechanisms.accounting",           # privacy descriptions and the mathematics of bounds
    "dpaudit.mechanisms.accounting.builders",  # descriptions -> claims, and their registry
    "dpaudit.mechanisms",                      # the mechanism contract and the built-in families
    "dpaudit.mechanisms.models.grad_sample",   # per-example gradients, layer by layer
    "dpaudit.mechanisms.models",               # torch models trained privately
    "dpaudit.mechanisms.adapters",             # DP libraries as they are called
    "dpaudit.attacks",                         # canaries and scores
    "dpaudit.auditing.statistics",                # what a certificate is made of
    "dpaudit.auditing.jobs",                      # what runs an audit
    "dpaudit.auditing.checks",                    # what is built on audits
    "dpaudit.auditing.checks.zoo",                # algorithms with known answers
    "dpaudit.auditing",                           # the audit package's front
    "dpaudit.reports",                         # renderings of a finished result
    "dpaudit.gallery",                         # the gallery of hidden-state results
    "dpaudit.commands",                        # the command line's subcommands
    "dpaudit",                                 # the public API and the command line's entry
)
LAYERS = {"mechanisms": 0, "attacks": 1, "audit": 2, "reports": 3, "dpaudit": 4}


def room_of(module: str) -> str | None:
    """The room of a dotted module name (``None`` outside the package)."""
    matches = [room for room in ROOMS if module == room or module.startswith(room + ".")]
    return max(matches, key=len) if matches else None


def package_modules() -> dict[str, Path]:
    """Every module of the package, by its dotted name."""
    modules = {}
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
    return modules


def runs(tree: ast.Module) -> list[ast.AST]:
    """The nodes of ``tree`` that can run: everything but the bodies of ``if TYPE_CHECKING:`` (annotations)."""
    found, pending = [], [tree]
    while pending:
        node = pending.pop()
        found.append(node)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            pending.extend(node.orelse)
        else:
            pending.extend(ast.iter_child_nodes(node))
    return found


def imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every absolute import in ``path`` that can run."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in runs(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == "dpaudit":  # from dpaudit import mechanisms: the subpackage is what is imported
                found.extend((node.lineno, f"dpaudit.{alias.name}") for alias in node.names
                             if not alias.name.startswith("__"))  # __version__ is metadata, not a room
            else:
                found.append((node.lineno, node.module))
    return found


def _violations() -> list[str]:
    bad = []
    order = {room: rank for rank, room in enumerate(ROOMS)}
    for name, path in sorted(package_modules().items()):
        own = room_of(name)
        for line, module in imports(path):
            top = module.split(".")[0]
            if top in ("mechanisms", "attacks", "audit", "reports"):
                bad.append(f"{path.relative_to(ROOT)}:{line} imports the bare top-level name {module!r}")
            target = room_of(module)
            if target is not None and order[target] > order[own]:
                bad.append(f"{path.relative_to(ROOT)}:{line} imports {module} (room {target} is above {own})")
    return bad


def test_every_module_has_a_room_and_no_room_imports_one_above():
    modules = package_modules()
    assert len(modules) > 100 and all(room_of(name) for name in modules)
    assert _violations() == []


def test_the_check_sees_a_back_edge(tmp_path):
    # the walker must catch imports inside functions too, or the test above could not fail
    probe = tmp_path / "probe.py"
    probe.write_text("import typing\nif typing.TYPE_CHECKING:\n    import dpaudit.auditing\n"
                     "def f():\n    from dpaudit.reports.render import render\n    import mechanisms.base\n")
    assert sorted(module for _, module in imports(probe)) == ["dpaudit.reports.render", "mechanisms.base", "typing"]
    assert room_of("dpaudit.auditing.jobs.runner") == "dpaudit.auditing.jobs"
    assert room_of("dpaudit.mechanisms.accounting.claims") == "dpaudit.mechanisms.accounting"
    assert ROOMS.index(room_of("dpaudit.auditing.checks.search")) > ROOMS.index(room_of("dpaudit.auditing.jobs.runner"))


def _commented(lines: list[str], first: int, last: int) -> bool:
    """Whether an import (lines ``first..last``, 1-based) carries a comment, or the block of imports, blank
    lines and comments directly above it holds one (a reason written once for a group of imports)."""
    if any("#" in line for line in lines[first - 1:last]):
        return True
    row = first - 2
    while row >= 0:
        text = lines[row].strip()
        if text.startswith("#"):
            return True
        if not (text == "" or text.startswith(("import ", "from ")) or text.endswith((",", "(")) or text == ")"):
            return False
        if "#" in text:
            return True
        row -= 1
    return False


def function_imports(path: Path) -> list[tuple[int, str, bool]]:
    """``(line, module, explained)`` of every import inside a function of ``path``: explained when it carries
    a comment, or a comment heads the block of imports it belongs to."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                explained = _commented(lines, node.lineno, node.end_lineno or node.lineno)
                found.append((node.lineno, module or ".", explained))
    return sorted(set(found))


def test_every_import_inside_a_function_says_why():
    """An import inside a function is a choice (start-up time, an optional library, a heavy module on a rare
    path): each says which in a comment; none may hide an import circle (tests/package/test_imports.py)."""
    unexplained, count = [], 0
    for name, path in sorted(package_modules().items()):
        for line, module, explained in function_imports(path):
            count += 1
            if not explained:
                unexplained.append(f"{path.relative_to(ROOT)}:{line} {module}")
    assert unexplained == [], f"{len(unexplained)} of {count} imports inside functions give no reason"


def test_the_comment_check_sees_an_unexplained_import(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    import torch  # heavy: only this path needs it\n    import numpy\n\n"
                     "def g():\n    x = 1\n    import scipy\n")
    assert function_imports(probe) == [(2, "torch", True), (3, "numpy", True), (7, "scipy", False)]


def test_importing_changes_no_global_state(tmp_path):
    """Importing every subpackage registers no mechanism and switches no matplotlib backend."""
    import subprocess
    import sys

    code = (
        "import matplotlib; before = matplotlib.get_backend()\n"
        "from dpaudit.mechanisms import registered; names = set(registered())\n"
        "import importlib\n"
        "for module in ('dpaudit', 'dpaudit.attacks', 'dpaudit.auditing', 'dpaudit.reports', 'dpaudit.auditing.checks.zoo',\n"
        "               'dpaudit.reports.plots', 'dpaudit.reports.html', 'dpaudit.gallery', 'dpaudit.cli'):\n"
        "    importlib.import_module(module)\n"
        "assert set(registered()) == names, set(registered()) - names\n"
        "assert matplotlib.get_backend() == before, (before, matplotlib.get_backend())\n"
    )
    # in an empty folder: a checkout's parent would hold the checkout itself, which shadows the installed package
    # as a namespace package when the checkout is named dpaudit (git clone's default)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)


CONCRETE = {"baseline", "kernels", "sgd", "dpsgd", "dpmf", "lssgd", "shuffle", "wrapped", "models"}


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
        for path in sorted((ROOT / folder).rglob("*.py")):
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
