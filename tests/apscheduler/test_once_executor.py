"""OnceExecutor with real APScheduler schedulers in real processes, sharing a private server.

Two schedulers run one interval job (every second, ``COUNT`` instants); each run records its
scheduled instant. With OnceExecutor every instant runs once in total; with the thread pool
alone (the broken twin) every instant runs twice, and the same check says so. Killing one
scheduler mid-run (SIGKILL) leaves the other running every later instant once, and the killed
run's instant again once its lease ran out. Every wait is bounded.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("apscheduler")

import redis

from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(90)
ROOT = Path(__file__).resolve().parents[2]
COUNT = 4  # instants, one a second


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    """A private server (the shared one is flushed by other tests)."""
    with RedisServer() as srv:
        yield srv.url + "/0"


def start(
    url: str, tag: str, modes: list[str], seconds: float = 0.2
) -> list[subprocess.Popen[str]]:
    """Start one scheduler per mode; once all are ready, give them the first instant."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.apscheduler.scheduler", url, tag, mode, str(seconds)],
            env=env,
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for mode in modes
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    client = redis.Redis.from_url(url)
    client.set(f"{tag}:count", COUNT)
    first = math.ceil(time.time()) + 1.0  # a whole second, 1-2 s away: every process is up
    client.set(f"{tag}:first", first)
    client.rpush(f"{tag}:go", *[first] * len(procs))
    return procs


def finish(procs: list[subprocess.Popen[str]]) -> None:
    """Wait for every scheduler to exit by itself (or to have been killed by the test)."""
    for proc in procs:
        proc.wait(timeout=COUNT + 30)
    assert all(p.returncode in (0, -signal.SIGKILL) for p in procs)


def runs(url: str, tag: str) -> list[tuple[str, int, int]]:
    """Every record: (start|done, instant ms, pid), in order."""
    found = redis.Redis.from_url(url).lrange(f"{tag}:runs", 0, -1)
    return [(k, int(i), int(p)) for k, i, p in (r.decode().split() for r in found)]


def per_instant(records: list[tuple[str, int, int]], kind: str) -> Counter[int]:
    return Counter(instant for k, instant, _ in records if k == kind)


def once_each(records: list[tuple[str, int, int]]) -> bool:
    """The check: COUNT instants, each started once and done once."""
    starts, dones = per_instant(records, "start"), per_instant(records, "done")
    return len(starts) == COUNT and set(starts.values()) == {1} and dones == starts


def test_two_schedulers_run_each_instant_once(url: str) -> None:
    procs = start(url, "t1", ["once", "once"])
    finish(procs)
    records = runs(url, "t1")
    assert once_each(records), records
    assert len({pid for _, _, pid in records}) <= 2


def test_twin_without_the_executor_runs_each_instant_twice(url: str) -> None:
    procs = start(url, "t2", ["plain", "plain"])
    finish(procs)
    records = runs(url, "t2")
    assert not once_each(records)
    assert set(per_instant(records, "start").values()) == {2}, records


def mid_run(url: str, tag: str, first: int) -> tuple[int, int] | None:
    """(pid, instant) of a run in progress, early enough that two instants come after it."""
    records = runs(url, tag)
    done = {(pid, instant) for k, instant, pid in records if k == "done"}
    running = [(p, i) for k, i, p in records if k == "start" and (p, i) not in done]
    early = [(p, i) for p, i in running if i <= first + (COUNT - 3) * 1000]
    return early[0] if early else None


def test_a_killed_scheduler_leaves_the_other_running_each_instant_once(url: str) -> None:
    procs = start(url, "t3", ["once", "once"], seconds=0.5)
    first = int(float(redis.Redis.from_url(url).get("t3:first") or 0) * 1000)
    deadline = time.monotonic() + COUNT
    found = None
    while found is None and time.monotonic() < deadline:  # kill whoever runs the job
        found = mid_run(url, "t3", first)
        time.sleep(0.02)
    assert found is not None, runs(url, "t3")
    victim_pid, killed_at = found
    os.kill(victim_pid, signal.SIGKILL)
    finish(procs)
    records = runs(url, "t3")
    starts, dones = per_instant(records, "start"), per_instant(records, "done")
    (survivor,) = {p.pid for p in procs} - {victim_pid}
    # The killed run's instant ran again on the survivor once the lease ran out (grace 5 s
    # > ttl 1.5 s); every instant is done once, every other one started once.
    assert ("done", killed_at, survivor) in records, records
    assert len(dones) == COUNT and set(dones.values()) == {1}, records
    assert starts[killed_at] == 2, records
    assert all(n == 1 for instant, n in starts.items() if instant != killed_at), records
    later = [r for r in records if r[1] > killed_at]
    assert later and {pid for _, _, pid in later} == {survivor}, records


def test_asyncio_and_thread_schedulers_run_each_instant_once(url: str) -> None:
    """AsyncIOOnceExecutor (a coroutine job) beside OnceExecutor: one key scheme, one run."""
    procs = start(url, "t4", ["asyncio", "once"])
    finish(procs)
    records = runs(url, "t4")
    assert once_each(records), records
