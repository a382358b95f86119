"""The shell's modules import one another without a circle, deferred imports included."""

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
