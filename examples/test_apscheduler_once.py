"""Run examples/apscheduler_once.py as processes: two with OnceExecutor run each fire once
between them; the twin, two with APScheduler's thread pool alone, run each fire twice."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("apscheduler")

import redis

from redlease.server import RedisServer

pytestmark = pytest.mark.timeout(90)
SCRIPT = Path(__file__).with_name("apscheduler_once.py")
SECONDS = 4.0


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer() as srv:
        yield srv


def fires(client: redis.Redis, name: str) -> Counter[int]:
    """How many runs each instant got."""
    entries = client.lrange(f"{name}:fired", 0, -1)
    return Counter(int(entry.split()[1]) for entry in entries)


def test_each_fire_runs_once_and_twice_without_the_executor(server: RedisServer) -> None:
    procs = []
    for name, extra in (("once", []), ("twin", ["--plain"])):  # all four at once
        for host in ("host-a", "host-b"):
            argv = [sys.executable, str(SCRIPT), "--url", server.url, "--name", name]
            argv += ["--id", host, "--every", "0.5", "--for", str(SECONDS), *extra]
            procs.append(subprocess.Popen(argv))
    for proc in procs:
        assert proc.wait(timeout=60) == 0
    client = server.client()
    once, twin = fires(client, "once"), fires(client, "twin")
    assert len(once) >= 3 and set(once.values()) == {1}, once
    # The twin: the instants both processes were up for ran twice.
    assert twin and max(twin.values()) == 2, twin
