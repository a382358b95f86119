"""redis-py's own Lock tests, run against ``redlease.compat`` (sync and asyncio).

The suite is fetched at test time from the sdist of the redis-py release installed (never
copied into this tree) and run in a subprocess, its ``Lock`` replaced by the drop-in
(``redispy_plugin.py``), against a server of its own (the suite flushes it), once per key
mode. Each outcome is compared with ``redis-py-lock.expected``: every failure there is an
expected difference, each naming the row of docs/moving-from-redis-py.md that explains it.
A new failure fails, and so does an expected one that no longer happens (the list is kept
true)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from tests.peers.suites import ROOT, differences, expected, fetch_sdist, outcomes, rows_missing
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(300)

HERE = Path(__file__).parent
EXPECTED = HERE / "redis-py-lock.expected"
MODES = ("redlease", "redis-py")  # compat.Lock's keys= (the default, the mixed fleet)
TESTS = ("tests/test_lock.py", "tests/test_asyncio/test_lock.py")


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """redis-py's sdist for the installed release, unpacked, with the plugin beside it."""
    top = fetch_sdist("redis", version("redis"), tmp_path_factory.mktemp("redis-py-suite"))
    shutil.copy(HERE / "redispy_plugin.py", top / "redlease_peer_plugin.py")
    return top


def run(suite: Path, mode: str, server: RedisServer, report: Path) -> dict[str, bool]:
    env = {
        "PYTHONPATH": f"{ROOT / 'src'}:{suite}",
        "REDLEASE_LOCK_KEYS": "" if mode == "redlease" else mode,
        "PATH": "/usr/bin:/bin",
    }
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "-p", "no:randomly", "-p", "redlease_peer_plugin", "-W", "ignore", *TESTS,
         f"--redis-url=redis://{server.host}:{server.port}", f"--junitxml={report}"],
        cwd=suite, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    found = outcomes(report)
    assert len(found) > 50, f"redis-py's Lock suite did not run in {suite}"
    return found


@pytest.mark.parametrize("mode", MODES)
def test_redis_pys_lock_suite_differs_only_as_documented(
    suite: Path, mode: str, make_server: Any, tmp_path: Path
) -> None:
    found = run(suite, mode, make_server(), tmp_path / "report.xml")
    listed = {test: row for (m, test), row in expected(EXPECTED).items() if m == mode}
    new, gone = differences(found, listed)
    assert not new, f"{mode}: redis-py's tests now failing, not listed in {EXPECTED.name}: {new}"
    assert not gone, f"{mode}: listed in {EXPECTED.name} but passing (or gone): {gone}"


def test_the_comparison_catches_a_new_failure_and_a_stale_entry() -> None:
    found = {"t.py::A::listed": False, "t.py::A::fixed": True, "t.py::A::broken": False}
    listed = {"t.py::A::listed": "row", "t.py::A::fixed": "row"}
    assert differences(found, listed) == (["t.py::A::broken"], ["t.py::A::fixed"])


def test_every_expected_difference_names_a_docs_row() -> None:
    missing = rows_missing(EXPECTED)
    assert not missing, f"rows not in moving-from-redis-py.md's tables: {missing}"
