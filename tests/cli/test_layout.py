"""The CLI's module layout: no import cycles, every module importable on its own.

Subcommand modules take what they share from ``redlease.cli._common`` and ``._connection``;
only ``redlease.cli`` (``main``, ``build_parser``) imports the subcommands, and only
``redlease.__main__`` imports ``main`` from it. These tests read the sources (no Redis needed)
and import each module in a fresh interpreter, the way a spawned demo worker does.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import redlease.cli

CLI_DIR = Path(redlease.cli.__file__).parent
SRC = CLI_DIR.parent.parent  # the directory holding the redlease package


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def cli_sources() -> dict[str, str]:
    """Every module of the CLI (and ``redlease.__main__``), by name: its source."""
    paths = [*sorted(CLI_DIR.rglob("*.py")), CLI_DIR.parent / "__main__.py"]
    return {module_name(path): path.read_text() for path in paths}


def packages(sources: dict[str, str]) -> set[str]:
    """The names in ``sources`` that are packages (some other name is inside them)."""
    return {name for name in sources if any(other.startswith(name + ".") for other in sources)}


def imports(name: str, source: str, is_package: bool) -> list[tuple[str, str | None]]:
    """``(module, imported name or None)`` for each import in ``source``, at any depth,
    with relative imports made absolute."""
    found: list[tuple[str, str | None]] = []
    here = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[: len(here.split(".")) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            found += [(module, alias.name) for alias in node.names]
    return found


def layout_problems(sources: dict[str, str]) -> list[str]:
    """What breaks the layout's rules in ``sources`` (module name -> source):

    1. a module inside a package of the CLI imports that package itself, or a name defined in
       its ``__init__`` (rather than a submodule): the package's ``__init__`` imports its
       modules, so that is a cycle. ``redlease.__main__`` is outside: it may import ``main``;
    2. the imports between the CLI's modules form a cycle.
    """
    pkgs = packages(sources)
    problems: list[str] = []
    edges: dict[str, set[str]] = {name: set() for name in sources}
    for name, source in sources.items():
        for module, imported in imports(name, source, name in pkgs):
            target = f"{module}.{imported}" if imported else module
            if target not in sources:  # a name defined in the module (or package's __init__)
                target = module
            if target not in sources or target == name:
                continue
            if target in pkgs and name.startswith(target + "."):
                what = f"{imported} from {module}" if imported else module
                problems.append(f"{name} imports {what}, its own package's __init__")
            edges[name].add(target)
    # 2. a depth-first search for a cycle
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycle = [*path[path.index(nxt) :], nxt]
                problems.append("import cycle: " + " -> ".join(cycle))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])
    return problems


def test_cli_modules_import_shared_names_from_common_not_from_the_package() -> None:
    sources = cli_sources()
    assert {"redlease.cli", "redlease.cli._common", "redlease.cli.demo"} <= set(sources)
    assert layout_problems(sources) == []


def test_the_layout_check_catches_a_cycle_through_the_package_and_between_siblings() -> None:
    """The twin: the check finds what the late import in build_parser() used to hide."""
    sources = cli_sources()
    old_style = dict(sources)
    old_style["redlease.cli.run"] += "\nfrom . import CliError\n"
    assert layout_problems(old_style) == [
        "redlease.cli.run imports CliError from redlease.cli, its own package's __init__",
        "import cycle: redlease.cli -> redlease.cli.run -> redlease.cli",
    ]
    inner = dict(sources)
    inner["redlease.cli.demo.counter"] += "\nfrom redlease.cli.demo import demo_server\n"
    assert any("demo.counter imports demo_server" in p for p in layout_problems(inner))
    siblings = dict(sources)
    siblings["redlease.cli._common"] += "\nfrom .run import GRACE\n"
    assert any(
        p.startswith("import cycle:") and "redlease.cli._common" in p and "redlease.cli.run" in p
        for p in layout_problems(siblings)
    )


def test_only_main_module_imports_from_redlease_cli() -> None:
    """Outside the CLI, only ``python -m redlease`` uses it: the library never does."""
    users = []
    for path in sorted((CLI_DIR.parent).rglob("*.py")):
        name = module_name(path)
        if name.startswith("redlease.cli"):
            continue
        for module, _ in imports(name, path.read_text(), path.name == "__init__.py"):
            if module == "redlease.cli" or module.startswith("redlease.cli."):
                users.append(name)
    assert users == ["redlease.__main__"]


@pytest.mark.parametrize("name", sorted(cli_sources()))
def test_each_cli_module_imports_on_its_own(name: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import importlib, sys; importlib.import_module(sys.argv[1])", name],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
