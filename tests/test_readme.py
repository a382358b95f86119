"""Every Python example in README.md runs under ``python -X dev -W error`` without a warning.

Each fenced ``python`` block runs in a subprocess of its own against a real server started by
the ``server`` fixture: ``redis.Redis()`` and ``redis.asyncio.Redis()`` without an address
point at it (the examples mean localhost). Names a block uses without defining them (the
reader's own functions and objects: ``save``, ``order``, ``build_report``, ...) get the stubs
in :data:`STUBS`; a block that uses a name with no stub fails, so a new example cannot go
unrun. A block with top-level ``await`` runs in ``asyncio.run()``, as ``python -m asyncio``
would run it. Any output on stderr (a ``ResourceWarning``, an "Exception ignored" report, a
log line) fails the test.
"""

from __future__ import annotations

import ast
import builtins
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.topology import RedisServer

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(120)

STUBS = {
    "save": "def save(*args, **kwargs):\n    pass\n",
    "order": "order = {'id': 42}\n",
    "build_report": "async def build_report(**kwargs):\n    pass\n",
    "job": (
        "class _Job:\n"
        "    def run(self, **kwargs):\n        pass\n"
        "    def cancel(self):\n        pass\n"
        "job = _Job()\n"
    ),
    "r": "import redis\nr = redis.Redis()\n",
    # A block that goes on from an earlier one uses its imports.
    "redis": "import redis\nimport redis.asyncio\n",
    "redlease": "import redlease\nimport redlease.asyncio\n",
}
"""Stand-ins for what an example leaves to the reader, by name."""

HARNESS = r"""
import ast, asyncio, inspect, sys

port = int(sys.argv[2])
import redis, redis.asyncio

for cls in (redis.Redis, redis.asyncio.Redis):  # no address given: the test's server
    def init(self, *args, _init=cls.__init__, **kwargs):
        if not args and "unix_socket_path" not in kwargs:
            kwargs.setdefault("port", port)
        _init(self, *args, **kwargs)
    cls.__init__ = init

with open(sys.argv[1]) as file:
    stubs, source = file.read().split("# --- example ---\n", 1)
namespace = {"__name__": "__main__"}
exec(stubs, namespace)
code = compile(source, "README.md example", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
if code.co_flags & inspect.CO_COROUTINE:
    asyncio.run(eval(code, namespace))
else:
    exec(code, namespace)
namespace.clear()  # what the example left behind is collected now, while warnings still work
import gc
gc.collect()
"""


def python_blocks(text: str) -> list[tuple[int, str]]:
    """``(line, source)`` of every fenced ```python block of a Markdown text."""
    blocks = []
    for match in re.finditer(r"^```python\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE):
        blocks.append((text.count("\n", 0, match.start()) + 1, match.group(1)))
    return blocks


def free_names(source: str) -> set[str]:
    """Names ``source`` reads but never binds (nor are builtins): what it leaves to the reader."""
    tree = ast.parse(source)
    loaded, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    return loaded - bound - set(dir(builtins))


SLOW_STEP = re.compile(r"^Executing <.*> took \d+\.\d+ seconds\n", re.MULTILINE)
"""asyncio's debug mode (on under ``-X dev``) reports any step over 0.1 s; on a loaded machine
that is the machine, not the example, so these lines alone are not held against it."""


def run_example(source: str, port: int, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """Run one example with its stubs under ``-X dev -W error``."""
    missing = free_names(source) - set(STUBS)
    assert not missing, f"no stub for {sorted(missing)}: add them to STUBS"
    stubs = "".join(STUBS[name] for name in sorted(free_names(source)))
    script = tmp_path / "example.py"
    script.write_text(stubs + "# --- example ---\n" + source)
    result = subprocess.run(
        [sys.executable, "-X", "dev", "-W", "error", "-c", HARNESS, str(script), str(port)],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=tmp_path,
    )
    result.stderr = SLOW_STEP.sub("", result.stderr)
    return result


BLOCKS = python_blocks((ROOT / "README.md").read_text())


def test_the_readme_has_its_examples() -> None:
    assert len(BLOCKS) >= 6, BLOCKS  # the extraction found them (the opening, on_lost, ...)
    assert any("closing" in source for _, source in BLOCKS)


@pytest.mark.parametrize(("line", "source"), BLOCKS, ids=[f"line-{n}" for n, _ in BLOCKS])
def test_a_readme_example_runs_without_a_warning(
    line: int, source: str, server: RedisServer, tmp_path: Path
) -> None:
    result = run_example(source, server.port, tmp_path)
    assert result.returncode == 0, f"README.md line {line}:\n{result.stdout}{result.stderr}"
    assert result.stderr == "", f"README.md line {line}:\n{result.stderr}"


def test_the_harness_reports_a_warning(server: RedisServer, tmp_path: Path) -> None:
    """The twin: the README's asyncio example as it behaved before issue 13 (nothing closed
    redlease's connections: 9 ResourceWarnings) fails the same check."""
    before = (
        "import redis.asyncio, redlease.asyncio\n"
        "from redlease._synchronization import AsyncAtShutdown\n"
        "AsyncAtShutdown.__init__ = lambda self, cleanup: setattr(self, '_cleanup', None)\n"
        "r = redis.asyncio.Redis()\n"
        "async with redlease.asyncio.Lock(r, 'nightly-report') as lock:\n"
        "    pass\n"
        "await r.aclose()\n"
    )
    result = run_example(before, server.port, tmp_path)
    assert "ResourceWarning" in result.stderr, result.stderr
