"""django-redis's own lock tests, run against ``redlease.compat.django_lock``.

The suite is fetched at test time from the sdist of the django-redis release installed (never
copied into this tree), its settings pointed at a server of its own (the suite flushes it),
its ``cache.lock()`` replaced by the drop-in (``djangoredis_plugin.py``), and run in a
subprocess once per key mode, on a plain cache and a sharded one (``ShardClient``). Each
outcome is compared with ``django-redis-lock.expected``, as redis-py's suite is
(test_redis_py_lock.py)."""

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
EXPECTED = HERE / "django-redis-lock.expected"
MODES = ("redlease", "redis-py")  # django_lock's keys= (the default, the mixed fleet)
LOCK_TESTS = ("test_lock", "test_lock_not_blocking", "test_lock_released_by_thread")
SETTINGS = ("sqlite", "sqlite_json", "sqlite_sharding")  # a plain cache, a serializer, shards


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """django-redis's sdist for the installed release, unpacked, with the plugin beside it."""
    where = tmp_path_factory.mktemp("django-redis-suite")
    top = fetch_sdist("django-redis", version("django-redis"), where)
    shutil.copy(HERE / "djangoredis_plugin.py", top / "redlease_peer_plugin.py")
    shutil.copytree(top / "tests" / "settings", top / "settings.published")
    return top


def point_at(suite: Path, server: RedisServer) -> None:
    """The suite's settings name 127.0.0.1:6379: the test's own server instead."""
    for published in (suite / "settings.published").glob("*.py"):
        text = published.read_text().replace("127.0.0.1:6379", f"{server.host}:{server.port}")
        (suite / "tests" / "settings" / published.name).write_text(text)


def run(suite: Path, mode: str, server: RedisServer, report: Path) -> dict[str, bool]:
    point_at(suite, server)
    env = {
        "PYTHONPATH": f"{ROOT / 'src'}:{suite}:{suite / 'tests'}",
        "REDLEASE_LOCK_KEYS": "" if mode == "redlease" else mode,
        "PATH": "/usr/bin:/bin",
    }
    ids = [
        f"tests/test_backend.py::TestDjangoRedisCache::{test}[{settings}]"
        for test in LOCK_TESTS
        for settings in SETTINGS
    ]
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-o", "addopts=", "-p", "no:cacheprovider",
         "-p", "no:randomly", "-p", "redlease_peer_plugin", "-W", "ignore", *ids,
         f"--junitxml={report}"],
        cwd=suite, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    found = outcomes(report)
    assert len(found) == len(ids), f"django-redis's lock tests did not run in {suite}: {found}"
    return found


@pytest.mark.parametrize("mode", MODES)
def test_django_redis_lock_tests_differ_only_as_documented(
    suite: Path, mode: str, make_server: Any, tmp_path: Path
) -> None:
    found = run(suite, mode, make_server(), tmp_path / "report.xml")
    listed = {test: row for (m, test), row in expected(EXPECTED).items() if m == mode}
    new, gone = differences(found, listed)
    assert not new, f"{mode}: django-redis's tests now failing, not in {EXPECTED.name}: {new}"
    assert not gone, f"{mode}: listed in {EXPECTED.name} but passing (or gone): {gone}"


def test_every_expected_difference_names_a_docs_row() -> None:
    missing = rows_missing(EXPECTED)
    assert not missing, f"rows not in moving-from-redis-py.md's tables: {missing}"
