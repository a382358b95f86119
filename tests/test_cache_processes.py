"""redlease.cached across real processes: 16 callers of a cold key compute it once, and
stale callers are answered at once while one process refreshes.

The twin caches the same function by hand without a lock (GET, compute on a miss, SET): the
16 processes all miss and compute it, which is the stampede ``cached`` prevents.
"""

from __future__ import annotations

import json
import multiprocessing
import time
from typing import Any

import pytest
import redis

import redlease
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(120)
SPAWN = multiprocessing.get_context("spawn")
PROCESSES = 16


def expensive(client: redis.Redis) -> dict[str, int]:
    """The computation: counted in Redis (across processes), and slow."""
    client.incr("computations")
    time.sleep(0.5)
    return {"answer": 42}


def call_cached(url: str, use_redlease: bool, start: Any, results: Any) -> None:
    client = redis.Redis.from_url(url)
    if use_redlease:

        @redlease.cached(client, ttl=60, lock_ttl=10, name="report")
        def report() -> dict[str, int]:
            return expensive(client)

        call = report
    else:

        def call() -> dict[str, int]:
            found = client.get("report")
            if found is not None:
                return dict(json.loads(found))
            value = expensive(client)
            client.set("report", json.dumps(value), ex=60)
            return value

    start.wait(60)  # a barrier: every process is ready before any calls
    began = time.monotonic()
    value = call()
    results.put((value, time.monotonic() - began))
    redlease.close(client)


def run(server: RedisServer, use_redlease: bool) -> tuple[int, list[Any]]:
    with server.client() as c:
        c.flushall()
    start, results = SPAWN.Barrier(PROCESSES + 1), SPAWN.Queue()
    workers = [
        SPAWN.Process(target=call_cached, args=(server.url, use_redlease, start, results))
        for _ in range(PROCESSES)
    ]
    for w in workers:
        w.start()
    start.wait(60)
    answers = [results.get(timeout=60) for _ in workers]
    for w in workers:
        w.join(30)
    assert all(w.exitcode == 0 for w in workers)
    with server.client() as c:
        computations = int(c.get("computations") or 0)
    return computations, answers


def test_sixteen_processes_on_a_cold_key_compute_it_once(server: RedisServer) -> None:
    computations, answers = run(server, use_redlease=True)
    assert computations == 1
    assert [value for value, _ in answers] == [{"answer": 42}] * PROCESSES
    assert max(waited for _, waited in answers) < 10.0  # (lock_ttl: none waited past it)


def test_twin_sixteen_processes_without_redlease_compute_it_many_times(
    server: RedisServer,
) -> None:
    computations, answers = run(server, use_redlease=False)
    assert [value for value, _ in answers] == [{"answer": 42}] * PROCESSES
    assert computations > 1  # the stampede: every process that missed computed it


def call_stale(url: str, start: Any, results: Any) -> None:
    """One process calling a function whose value has gone stale; it stays up a little
    after its call, so that a refresh running in its background thread can finish."""
    client = redis.Redis.from_url(url)

    @redlease.cached(client, ttl=0.5, stale=60, lock_ttl=10, name="report")
    def report() -> dict[str, int]:
        return {"answer": int(client.incr("computations"))} | _slowly()

    start.wait(60)
    began = time.monotonic()
    value = report()
    results.put((value, time.monotonic() - began))
    time.sleep(3.0)
    redlease.close(client)


def _slowly() -> dict[str, int]:
    time.sleep(2.0)
    return {}


def test_stale_callers_in_many_processes_are_answered_at_once_and_one_refreshes(
    server: RedisServer,
) -> None:
    with server.client() as c:
        c.flushall()
    workers = 8
    start, results = SPAWN.Barrier(workers + 1), SPAWN.Queue()
    rest = [
        SPAWN.Process(target=call_stale, args=(server.url, start, results)) for _ in range(workers)
    ]
    # the first process computes the value alone, then it goes stale
    solo = SPAWN.Barrier(1)
    first = SPAWN.Process(target=call_stale, args=(server.url, solo, results))
    first.start()
    assert results.get(timeout=60)[0] == {"answer": 1}
    time.sleep(1.0)  # past ttl (0.5 s, from the write), well within stale (60 s)
    for child in rest:
        child.start()
    start.wait(60)
    answers = [results.get(timeout=60) for _ in rest]
    for child in [first, *rest]:
        child.join(30)
        assert child.exitcode == 0
    assert [value for value, _ in answers] == [{"answer": 1}] * workers  # the old value...
    assert max(took for _, took in answers) < 1.5  # ... at once, not after a 2 s refresh
    with server.client() as c:
        assert int(c.get("computations") or 0) == 2  # one refresh for 8 stale callers
