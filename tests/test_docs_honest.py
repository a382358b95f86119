"""The docs say what the code does, where a test can tell (no server needed).

- every relative link of the Markdown docs resolves to a file of the repository;
- each signature of the README's table of primitives is the real one: the parameters, their
  order, keyword-only markers and defaults (a row without ``...`` lists them all), and so are
  the method signatures and result fields the row names;
- each primitive of that table has its tests run again on a Redis Cluster (or, for
  ``Redlock``, a test that it refuses one).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

import redlease

ROOT = Path(__file__).resolve().parent.parent
MARKDOWN = sorted(
    [
        ROOT / "README.md",
        ROOT / "CHANGELOG.md",
        *(ROOT / "docs").glob("*.md"),
        *(ROOT / "examples").rglob("README.md"),
        *(ROOT / "benchmarks").rglob("README.md"),
    ]
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def relative_links(path: Path) -> list[str]:
    """The relative link targets of a Markdown file, fenced code left out."""
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.DOTALL | re.MULTILINE)
    return [
        target
        for target in LINK.findall(text)
        if not re.match(r"[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")
    ]


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    dead = [
        target
        for target in relative_links(path)
        if not (path.parent / target.split("#", 1)[0]).exists()
    ]
    assert not dead, f"{path.relative_to(ROOT)}: dead links {dead}"


def test_a_dead_link_is_caught(tmp_path: Path) -> None:
    """The twin: the recipes' old link to ``reference/cli`` (no such file) is reported."""
    page = tmp_path / "recipes.md"
    page.write_text("See [the reference](reference/cli) and [web](https://example.com).\n")
    assert relative_links(page) == ["reference/cli"]
    assert not (tmp_path / "reference/cli").exists()


# -- the README's table of primitives ------------------------------------------------------------

ROW = re.compile(r"^\| `(?P<name>[A-Z]\w*)\((?P<params>[^`]*)\)` \| (?P<text>.*) \|$", re.M)
CALL = re.compile(r"`(?P<name>[A-Za-z_]\w*)\((?P<params>[^`]*?)\)(?: -> [^`]*)?`")


def table_rows() -> list[tuple[str, str, str]]:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## The primitives") :]
    section = section[: section.index("\n\n", section.index("| name |"))]
    return [(m["name"], m["params"], m["text"]) for m in ROW.finditer(section)]


ROWS = table_rows()


def documented(params: str) -> tuple[list[tuple[str, str, Any]], bool]:
    """``([(name, kind, default), ...], complete)`` of a parameter list as the README writes it
    (``...`` stands for parameters left out; ``a | b`` for a choice of defaults)."""
    complete = "..." not in params.replace("=...", "")
    params = re.sub(r",?\s*\.\.\.(?=\s*[,)]|\s*$)", "", params.replace("=...", "=None"))
    params = re.sub(r'=("[^"]*")(?: \\?\| "[^"]*")+', r"=\1", params)
    params = re.sub(r",\s*\*\s*$", "", params)  # "name, *, ...": nothing shown after the *
    tree = ast.parse(f"def f({params}): pass").body[0]
    assert isinstance(tree, ast.FunctionDef)
    args = tree.args
    found: list[tuple[str, str, Any]] = []
    positional = args.posonlyargs + args.args
    defaults: list[Any] = [inspect.Parameter.empty] * (len(positional) - len(args.defaults))
    defaults += [ast.literal_eval(d) for d in args.defaults]
    found += [(a.arg, "positional", d) for a, d in zip(positional, defaults, strict=True)]
    for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        found.append(
            (a.arg, "keyword", inspect.Parameter.empty if d is None else ast.literal_eval(d))
        )
    return found, complete


def actual(fn: Any) -> list[tuple[str, str, Any]]:
    found = []
    for p in inspect.signature(fn).parameters.values():
        if p.name == "self":
            continue
        kind = "keyword" if p.kind is inspect.Parameter.KEYWORD_ONLY else "positional"
        found.append((p.name, kind, p.default))
    return found


def check_signature(label: str, fn: Any, params: str) -> None:
    """The README's ``params`` of ``fn``: every parameter real, in order, of the right kind,
    with the real default; all of them unless ``...`` says some are left out."""
    written, complete = documented(params)
    real = actual(fn)
    by_name = {name: (kind, default) for name, kind, default in real}
    for name, kind, default in written:
        assert name in by_name, f"{label}: no parameter {name!r} in {real}"
        assert by_name[name][0] == kind, f"{label}: {name} is {by_name[name][0]}, not {kind}"
        if default is not inspect.Parameter.empty and "=..." not in params:
            assert by_name[name][1] == default, f"{label}: {name}={by_name[name][1]!r}"
    order = [name for name, _, _ in real]
    names = [name for name, _, _ in written]
    assert names == sorted(names, key=order.index), f"{label}: order {names} vs {order}"
    if complete:
        assert names == order, f"{label}: the README leaves out {sorted(set(order) - set(names))}"


def test_the_table_lists_every_primitive() -> None:
    assert [name for name, _, _ in ROWS] == [
        "Lock",
        "RLock",
        "Redlock",
        "Inventory",
        "RateLimiter",
        "FencedStore",
        "Semaphore",
        "ReadWriteLock",
        "CountDownLatch",
        "Election",
        "Once",
    ]


@pytest.mark.parametrize(("name", "params", "text"), ROWS, ids=[row[0] for row in ROWS])
def test_a_rows_signatures_are_the_real_ones(name: str, params: str, text: str) -> None:
    cls = getattr(redlease, name)
    check_signature(name, cls.__init__, params)
    for call in CALL.finditer(text):
        target = getattr(cls, call["name"], None) or getattr(redlease, call["name"], None)
        label = f"{name}: {call['name']}"
        if inspect.isfunction(target):
            check_signature(label, target, call["params"])
        elif inspect.isclass(target):  # a result: its fields, all of them, in order
            fields = getattr(target, "_fields", None) or [
                f.name for f in dataclasses.fields(target)
            ]
            written = [p.strip() for p in call["params"].split(",")]
            assert written == list(fields), f"{label}: fields {list(fields)}"
        else:
            pytest.fail(f"{label}: neither a method of {name} nor a redlease name")


def test_a_wrong_signature_is_caught() -> None:
    """The twin: the README's old rows (``RateLimit`` without its later fields, ``reserve``
    with positional parameters, ``Inventory`` without ``prefix``) fail the same checks."""
    params = next(params for name, params, _ in ROWS if name == "RateLimiter")
    with pytest.raises(AssertionError, match="fields"):
        test_a_rows_signatures_are_the_real_ones(
            "RateLimiter",
            params,
            "`hit(key, cost=1)` -> `RateLimit(allowed, remaining, retry_after, reset_after)`",
        )
    with pytest.raises(AssertionError, match="is keyword, not positional"):
        check_signature("Inventory: reserve", redlease.Inventory.reserve, "user, order_id")
    with pytest.raises(AssertionError, match="leaves out"):
        check_signature("Inventory", redlease.Inventory.__init__, "client, name, *, retention")


CLUSTER_TESTS = {
    "Lock": "tests/_async/test_lock_cluster.py",
    "RLock": "tests/_async/test_lock_cluster.py",  # test_lock_basics.py's RLock tests, again
    "Redlock": "tests/test_cluster_faults.py",  # refuses a cluster client
    "Inventory": "tests/_async/test_inventory_cluster.py",
    "RateLimiter": "tests/_async/test_ratelimit_cluster.py",
    "FencedStore": "tests/_async/test_fencing_cluster.py",
    "Semaphore": "tests/_async/test_semaphore_cluster.py",
    "ReadWriteLock": "tests/_async/test_rwlock_cluster.py",
    "CountDownLatch": "tests/_async/test_latch_cluster.py",
    "Election": "tests/_async/test_election_cluster.py",
    "Once": "tests/_async/test_once_cluster.py",
}


@pytest.mark.parametrize("name", [row[0] for row in ROWS])
def test_each_primitive_is_tested_on_a_cluster(name: str) -> None:
    """Its cluster test file uses the cluster fixture and makes the primitive (itself, or
    in the tests it runs again: ``from tests._async.test_x import *``)."""
    assert name in CLUSTER_TESTS, f"{name}: which test runs it on a Redis Cluster?"
    source = (ROOT / CLUSTER_TESTS[name]).read_text()
    assert re.search(r"\bcluster(_client)?\b", source)
    for module in re.findall(r"^from tests\._async\.(\w+) import \*", source, flags=re.M):
        source += (ROOT / "tests/_async" / f"{module}.py").read_text()
    assert f"redlease.{name}(" in source, f"{CLUSTER_TESTS[name]} never makes a {name}"


def cluster_figures(text: str, start: str) -> list[str]:
    """The ratios (``1.23`` and a multiplication sign) of the paragraph that begins ``start``."""
    paragraph = text[text.index(start) :]
    paragraph = paragraph[: paragraph.index("\n\n")]
    return re.findall(r"\d+\.\d+\u00d7", paragraph)


def test_the_cluster_figures_agree_between_readme_and_topologies() -> None:
    readme = cluster_figures((ROOT / "README.md").read_text(), "On a 3-master + 3-replica")
    topologies = cluster_figures((ROOT / "docs/topologies.md").read_text(), "- **Cost.**")
    assert readme and readme == topologies[: len(readme)]  # then the goal, 1.2


def test_how_it_is_built_names_every_module() -> None:
    """README's layout names each ``_core`` and ``_async`` module, and every top-level entry
    of the package, so that a new one is placed there too."""
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("```\nsrc/redlease/\n") :]
    block = block[: block.index("\n```\n")]
    package = ROOT / "src/redlease"
    wanted = {p.name for p in package.iterdir() if not p.name.startswith(("__p", "py."))}
    wanted -= {"__main__.py"}
    for sub in ("_core", "_async"):
        wanted |= {p.name for p in (package / sub).glob("*.py") if p.name != "__init__.py"}
    words = set(re.findall(r"[\w.]+", block.replace("/", " ")))
    assert not sorted(wanted - words), f"not in README's layout: {sorted(wanted - words)}"
