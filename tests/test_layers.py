"""The shell's modules import one another without a circle, deferred imports included; no
module of the package uses another module's private names, or imports the tests' support."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
LAYERS = ("redlease._async", "redlease._sync", "redlease._core")


def imports_of(path: Path, module: str) -> set[str]:
    """Every module ``module`` (at ``path``) imports, at the top or inside a function."""
    package = module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            if node.level:
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found |= {target, *(f"{target}.{alias.name}" for alias in node.names)}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def layer_graph() -> dict[str, set[str]]:
    """Module -> the modules of the same layers it imports."""
    paths = {}
    for layer in LAYERS:
        for path in (SRC / layer.replace(".", "/")).glob("*.py"):
            if path.name != "__init__.py":
                paths[f"{layer}.{path.stem}"] = path
    return {m: imports_of(p, m) & (paths.keys() - {m}) for m, p in paths.items()}


def a_circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle in ``graph`` (its modules in order), or None."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return [*path[path.index(module) :], module]
        if module in done:
            return None
        for target in sorted(graph.get(module, ())):
            circle = visit(target, [*path, module])
            if circle is not None:
                return circle
        done.add(module)
        return None

    for module in sorted(graph):
        circle = visit(module, [])
        if circle is not None:
            return circle
    return None


def test_no_import_circle_in_the_shell_or_the_core() -> None:
    assert a_circle(layer_graph()) is None


@pytest.mark.parametrize("deferred", [False, True])
def test_a_circle_is_found_even_through_a_deferred_import(tmp_path: Path, deferred: bool) -> None:
    """The twin: a backend module importing the cluster module that builds on it."""
    client = tmp_path / "client.py"
    deferred_import = "def backend_for():\n    from .cluster import Cluster\n"
    client.write_text(deferred_import if deferred else "from .cluster import Cluster\n")
    cluster = tmp_path / "cluster.py"
    cluster.write_text("from .client import backend_for\n")
    graph = {
        "pkg.client": imports_of(client, "pkg.client") & {"pkg.cluster"},
        "pkg.cluster": imports_of(cluster, "pkg.cluster") & {"pkg.client"},
    }
    assert a_circle(graph) == ["pkg.client", "pkg.cluster", "pkg.client"]


def imports_of_the_tests(package: Path) -> list[str]:
    """Each module of ``package`` that imports the tests' support (``tests``, not installed:
    the installed package would fail to import it)."""
    found = []
    for path in sorted(package.rglob("*.py")):
        module = ".".join(path.relative_to(package.parent).with_suffix("").parts)
        names = imports_of(path, module)
        if any(name == "tests" or name.startswith("tests.") for name in names):
            found.append(path.relative_to(package.parent).as_posix())
    return found


def test_the_package_never_imports_the_tests_support() -> None:
    assert imports_of_the_tests(SRC / "redlease") == []


def test_twin_a_package_importing_the_tests_topology_is_found(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "demo.py").write_text("def f():\n    from tests.topology import X\n")
    (tmp_path / "pkg" / "ok.py").write_text("from .tests_like import y\n")
    assert imports_of_the_tests(tmp_path / "pkg") == ["pkg/demo.py"]


# -- private names ---------------------------------------------------------------------------
# A module uses only its own private (``_x``) names: ``x._name`` where ``x`` is not ``self``,
# ``cls``, ``cls(...)`` or ``super()`` must name something this module defines, and
# ``from m import _name`` must import a private module, not a private name of another module.

PACKAGE = SRC / "redlease"
ALLOWED = {("_redispy_versions.py", "conn._sock")}
"""Reaches allowed where they are: redis-py's socket, read in ``socket_of`` only."""
NAMEDTUPLE = {"_replace", "_asdict", "_fields", "_make"}  # public API despite the underscore


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def defined_in(tree: ast.AST) -> set[str]:
    """The names a module defines: functions, classes, assigned names and attributes, and
    strings that name attributes (``getattr(x, "_name")``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)
    return names


def is_module(path: Path, node: ast.ImportFrom, name: str, root: Path) -> bool:
    """Whether ``from ... import name`` in ``path`` imports a module (``root``: where
    absolute imports start)."""
    base = path.parent
    for _ in range(node.level - 1):
        base = base.parent
    if not node.level:
        base = root
    base = base.joinpath(*(node.module or "").split(".")) if node.module else base
    return (base / f"{name}.py").exists() or (base / name / "__init__.py").exists()


def own_object(value: ast.expr) -> bool:
    """``self``, ``cls``, ``cls(...)`` (a new instance of the class itself) or ``super()``."""
    if isinstance(value, ast.Name):
        return value.id in ("self", "cls")
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id in ("cls", "super")
    )


def private_reaches(path: Path, root: Path = SRC) -> list[str]:
    """Each use in ``path`` of a private name that ``path`` does not define."""
    tree = ast.parse(path.read_text())
    defined = defined_in(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if is_private(alias.name) and not is_module(path, node, alias.name, root):
                    module = "." * node.level + (node.module or "")
                    found.append((node.lineno, f"from {module} import {alias.name}"))
        elif isinstance(node, ast.Attribute) and is_private(node.attr):
            if own_object(node.value) or node.attr in defined | NAMEDTUPLE:
                continue
            found.append((node.lineno, ast.unparse(node)))
    return [f"{line}: {text}" for line, text in sorted(found)]


def test_no_module_uses_another_modules_private_names() -> None:
    reaches = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        if "_sync" in path.relative_to(PACKAGE).parts:
            continue
        for reach in private_reaches(path):
            if (where, reach.partition(": ")[2]) not in ALLOWED:
                reaches.append(f"{where}:{reach}")
    assert reaches == []


def test_the_one_allowed_reach_is_in_one_place() -> None:
    for where, expression in ALLOWED:
        found = [r for r in private_reaches(PACKAGE / where) if r.endswith(": " + expression)]
        assert len(found) == 1, found


def test_a_private_reach_is_found(tmp_path: Path) -> None:
    """The twin: a module reaching into another's private names is caught; its own private
    names, its own class's, and private modules are not."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "_helpers.py").write_text("def _secret() -> None: ...\n")
    user = pkg / "user.py"
    user.write_text(
        "from . import _helpers\n"
        "from ._helpers import _secret\n"
        "from pkg import _helpers as again\n"
        "class Mine:\n"
        "    def __init__(self, other):\n"
        "        self._own = other._state\n"
        "    @classmethod\n"
        "    def make(cls):\n"
        "        return cls()._own, super()._own, _helpers._secret, self._own\n"
        "def peek(mine):\n"
        "    return mine._own, mine.__class__\n"
    )
    assert private_reaches(user, root=tmp_path) == [
        "2: from ._helpers import _secret",
        "6: other._state",
        "9: _helpers._secret",
    ]
