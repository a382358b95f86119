"""redis-py's own Lock tests, run against ``redlease.compat`` (sync and asyncio).

The suite is fetched at test time from the sdist of the redis-py release installed (never
copied into this tree) and run in a subprocess, its ``Lock`` replaced by the drop-in
(``redispy_plugin.py``), against a server of its own (the suite flushes it), once per key
mode. Each outcome is compared with ``redis-py-lock.expected``: every failure there is an
expected difference, each naming the row of docs/moving-from-redis-py.md that explains it.
A new failure fails, and so does an expected one that no longer happens (the list is kept
true)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from redlease.server import RedisServer

pytestmark = pytest.mark.timeout(300)

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
EXPECTED = HERE / "redis-py-lock.expected"
DOC = ROOT / "docs" / "moving-from-redis-py.md"
MODES = ("redlease", "redis-py")  # compat.Lock's keys= (the default, the mixed fleet)
TESTS = ("tests/test_lock.py", "tests/test_asyncio/test_lock.py")


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """redis-py's sdist for the installed release, unpacked, with the plugin beside it."""
    where = tmp_path_factory.mktemp("redis-py-suite")
    release = version("redis")
    fetched = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
         f"redis=={release}", "-d", str(where)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert fetched.returncode == 0, f"could not fetch redis-py {release}'s sdist: {fetched.stderr}"
    (sdist,) = where.glob("redis-*.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(where, filter="data")
    top = where / f"redis-{release}"
    shutil.copy(HERE / "redispy_plugin.py", top / "redlease_peer_plugin.py")
    return top


def expected() -> dict[tuple[str, str], str]:
    """(mode, test id) -> the docs row that explains the difference."""
    found = {}
    for line in EXPECTED.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            mode, test, row = (part.strip() for part in line.split("|"))
            found[mode, test] = row
    return found


def outcomes(report: Path) -> dict[str, bool]:
    """Test id -> passed (a skip counts as passed) from a JUnit XML report."""
    found = {}
    for case in ET.parse(report).iter("testcase"):
        path = case.get("classname", "").split(".")
        test = "/".join(path[:-1]) + ".py::" + path[-1] + "::" + case.get("name", "")
        failed = case.find("failure") is not None or case.find("error") is not None
        found[test] = not failed
    return found


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
    listed = {test: row for (m, test), row in expected().items() if m == mode}
    new, gone = differences(found, listed)
    assert not new, f"{mode}: redis-py's tests now failing, not listed in {EXPECTED.name}: {new}"
    assert not gone, f"{mode}: listed in {EXPECTED.name} but passing (or gone): {gone}"


def differences(found: dict[str, bool], listed: dict[str, str]) -> tuple[list[str], list[str]]:
    """(failing tests not listed, listed tests that pass or are gone)."""
    new = sorted(test for test, passed in found.items() if not passed and test not in listed)
    gone = sorted(test for test in listed if found.get(test, True))
    return new, gone


def test_the_comparison_catches_a_new_failure_and_a_stale_entry() -> None:
    found = {"t.py::A::listed": False, "t.py::A::fixed": True, "t.py::A::broken": False}
    listed = {"t.py::A::listed": "row", "t.py::A::fixed": "row"}
    assert differences(found, listed) == (["t.py::A::broken"], ["t.py::A::fixed"])


def test_every_expected_difference_names_a_docs_row() -> None:
    text = DOC.read_text()
    rows = {row for row in expected().values()}
    missing = sorted(row for row in rows if not re.search(r"^\| " + re.escape(row), text, re.M))
    assert not missing, f"rows not in {DOC.name}'s tables: {missing}"
