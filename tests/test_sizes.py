"""The code stays small enough to read (docs/design.md, "Layers"): no function of the package
above 60 lines but the few listed in LONG_FUNCTIONS, which may only shrink; no hand-written
file above 600 lines; the I/O layer at most 1.5x the pure core."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "redlease"

FUNCTION_LIMIT = 60
"""Lines of one ``def`` or ``async def``, docstring included (``end_lineno - lineno + 1``),
over every module of the package, generated ``_sync/`` included: it mirrors ``_async/``."""
LONG_FUNCTIONS = {
    "src/redlease/_async/lock.py::AsyncLock.__init__": 75,
    "src/redlease/_async/redispy.py::AsyncRedisPyLock.__init__": 68,
    "src/redlease/_cached.py::cached": 84,
    "src/redlease/_fanout/tasks.py::AsyncFanOut.run": 97,
    "src/redlease/_sync/lock.py::Lock.__init__": 75,
    "src/redlease/_sync/redispy.py::RedisPyLock.__init__": 68,
    "src/redlease/cli/demo/flashsale.py::run_contest": 72,
    "src/redlease/cli/demo/flashsale_report.py::print_report": 65,
    "src/redlease/cli/run.py::add_parser": 63,
}
"""The functions above FUNCTION_LIMIT when the limit came in, at their length then: an entry
may only go down (lower it when a function shrinks; delete it at FUNCTION_LIMIT or less)."""

FILE_LIMIT = 600
"""A loose cap on a file, over the package, tests, benchmarks, scripts and examples: short
functions can still pile up into a module nobody reads in one sitting. It is loose so that a
concept is not split by mechanism to fit it (what the 500-line cap before it did)."""
# Hand-written: everything but the generated sync half (scripts/unasync.py writes it).
TREES = ("src", "tests", "benchmarks", "scripts", "examples")
# The I/O layer: everything in _async/ that is not a primitive's shell, and the modules
# beside it that only the shell uses. What is left in _async/ is one shell per primitive.
SHELLS = {
    "breakglass", "cache", "election", "fencing", "inventory", "latch", "lock",
    "once", "ratelimit", "redispy", "redlock", "rwlock", "semaphore", "shared",
}  # fmt: skip
BESIDE = ("_fanout", "_redispy_versions", "_synchronization")


def lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def python_files(directory: Path) -> list[Path]:
    if directory.is_dir():
        return sorted(directory.rglob("*.py"))
    return [directory] if directory.exists() else []


# -- functions -------------------------------------------------------------------------------


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """``(qualified name, lines)`` of every function in ``tree``: methods as ``Class.name``,
    nested functions as ``outer.inner`` (counted in their outer function's lines too)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + node.name
            yield name, (node.end_lineno or node.lineno) - node.lineno + 1
            yield from functions(node, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, f"{prefix}{node.name}.")
        else:
            yield from functions(node, prefix)


def function_lengths(root: Path) -> dict[str, int]:
    """``path::qualified name`` -> lines, for every function under ``root / "src"``."""
    found = {}
    for path in python_files(root / "src"):
        where = path.relative_to(root).as_posix()
        for name, length in functions(ast.parse(path.read_text())):
            found[f"{where}::{name}"] = max(length, found.get(f"{where}::{name}", 0))
    return found


def function_problems(lengths: Mapping[str, int], allowed: Mapping[str, int]) -> list[str]:
    """What to do about each function over the limit that the list does not allow, and each
    entry of the list that no longer says the truth."""
    problems = []
    for name, length in sorted(lengths.items()):
        if name in allowed and length > allowed[name]:
            problems.append(f"{name}: {length} lines, listed at {allowed[name]}: shorten it")
        elif name not in allowed and length > FUNCTION_LIMIT:
            problems.append(f"{name}: {length} lines (limit {FUNCTION_LIMIT}): shorten it")
    for name, listed in sorted(allowed.items()):
        length = lengths.get(name)
        if length is None:
            problems.append(f"{name}: no such function now: delete its LONG_FUNCTIONS entry")
        elif length <= FUNCTION_LIMIT:
            problems.append(f"{name}: {length} lines now: delete its LONG_FUNCTIONS entry")
        elif length < listed:
            problems.append(f"{name}: {length} lines now: lower its LONG_FUNCTIONS entry")
    return problems


def test_no_function_of_the_package_is_above_60_lines_but_the_listed_ones() -> None:
    assert function_problems(function_lengths(ROOT), LONG_FUNCTIONS) == []


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def a_function(name: str, length: int) -> str:
    """The source of a function ``name`` of ``length`` lines."""
    return f"def {name}():\n" + "    x = 1\n" * (length - 1)


def test_twin_long_grown_shrunk_and_gone_functions_are_found(tmp_path: Path) -> None:
    at_limit = FUNCTION_LIMIT
    write(tmp_path / "src/new.py", a_function("new", at_limit + 1) + a_function("ok", at_limit))
    write(
        tmp_path / "src/listed.py",
        "class C:\n"
        + "".join(f"    {line}\n" for line in a_function("grown", at_limit + 3).splitlines())
        + a_function("shrunk", at_limit + 1)
        + a_function("short", at_limit)
        + a_function("kept", at_limit + 2),
    )
    allowed = {
        "src/listed.py::C.grown": at_limit + 2,
        "src/listed.py::shrunk": at_limit + 2,
        "src/listed.py::short": at_limit + 2,
        "src/listed.py::kept": at_limit + 2,
        "src/listed.py::gone": at_limit + 2,
    }
    assert function_problems(function_lengths(tmp_path), allowed) == [
        f"src/listed.py::C.grown: {at_limit + 3} lines, listed at {at_limit + 2}: shorten it",
        f"src/new.py::new: {at_limit + 1} lines (limit {at_limit}): shorten it",
        "src/listed.py::gone: no such function now: delete its LONG_FUNCTIONS entry",
        f"src/listed.py::short: {at_limit} lines now: delete its LONG_FUNCTIONS entry",
        f"src/listed.py::shrunk: {at_limit + 1} lines now: lower its LONG_FUNCTIONS entry",
    ]


def test_a_nested_function_is_named_by_its_outer_one() -> None:
    tree = ast.parse("class C:\n    async def f(self):\n        def g():\n            pass\n")
    assert list(functions(tree)) == [("C.f", 3), ("C.f.g", 2)]


# -- files and layers ------------------------------------------------------------------------


def hand_written(root: Path) -> list[Path]:
    found = []
    for tree in TREES:
        for path in python_files(root / tree):
            if "_sync" not in path.relative_to(root).parts:
                found.append(path)
    return found


def too_long(root: Path, limit: int = FILE_LIMIT) -> list[str]:
    paths = hand_written(root)
    return [f"{p.relative_to(root).as_posix()}: {lines(p)}" for p in paths if lines(p) > limit]


def io_layer() -> list[Path]:
    shell = [p for p in python_files(PACKAGE / "_async") if p.stem not in SHELLS]
    beside = []
    for name in BESIDE:
        module = PACKAGE / f"{name}.py"
        beside += [module] if module.exists() else python_files(PACKAGE / name)
    return shell + beside


def test_no_hand_written_file_is_above_600_lines() -> None:
    assert too_long(ROOT) == []


def test_twin_a_long_file_is_found(tmp_path: Path) -> None:
    write(tmp_path / "src/long.py", "x = 1\n" * (FILE_LIMIT + 1))
    write(tmp_path / "src/_sync/long.py", "x = 1\n" * (FILE_LIMIT + 1))
    assert too_long(tmp_path) == [f"src/long.py: {FILE_LIMIT + 1}"]


def test_the_io_layer_is_at_most_one_and_a_half_times_the_core() -> None:
    io = sum(lines(p) for p in io_layer())
    core = sum(lines(p) for p in python_files(PACKAGE / "_core"))
    assert io <= 1.5 * core, f"I/O layer {io} lines, _core {core}: {io / core:.2f}x"


def test_every_shell_named_is_a_module() -> None:
    """A shell renamed or removed must leave SHELLS too, or the I/O layer would shrink by
    a file that no longer counts."""
    assert sorted(s for s in SHELLS if not (PACKAGE / "_async" / f"{s}.py").exists()) == []
