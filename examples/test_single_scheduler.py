"""Run examples/single_scheduler.py as three processes: one fires at a time, another takes
over when it is killed (within the lease) or stops, and the twin without the election fires
from all three."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from redlease.server import RedisServer

pytestmark = pytest.mark.timeout(90)
SCRIPT = Path(__file__).with_name("single_scheduler.py")
TTL = 2.0


@pytest.fixture
def server() -> Iterator[RedisServer]:
    with RedisServer() as srv:
        yield srv


def start(server: RedisServer, count: int, *extra: str) -> dict[str, subprocess.Popen[bytes]]:
    procs = {}
    for i in range(count):
        host = f"host-{i}"
        argv = [sys.executable, str(SCRIPT), "--url", server.url, "--id", host]
        argv += ["--interval", "0.1", "--ttl", str(TTL), *extra]
        procs[host] = subprocess.Popen(argv)
    return procs


def stop_all(procs: dict[str, subprocess.Popen[bytes]]) -> None:
    for proc in procs.values():
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)


def fired(client: redis.Redis) -> list[tuple[str, int]]:
    entries = client.lrange("scheduler:fired", 0, -1)
    return [(host, int(term)) for host, term in (x.decode().split() for x in entries)]


def wait_for(predicate: Any, limit: float = 30.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


def leaders(firings: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The successive (host, term) that fired, each once, in order."""
    seen: list[tuple[str, int]] = []
    for firing in firings:
        if not seen or seen[-1] != firing:
            seen.append(firing)
    return seen


def test_one_fires_and_another_takes_over_when_it_is_killed(server: RedisServer) -> None:
    client = server.client()
    procs = start(server, 3)
    try:
        assert wait_for(lambda: len(fired(client)) >= 10)
        (first, term), *_ = leaders(fired(client))
        assert leaders(fired(client)) == [(first, term)]  # one scheduler fires, the others wait
        procs[first].send_signal(signal.SIGKILL)
        procs[first].wait(timeout=30)
        killed, before = time.monotonic(), len(fired(client))
        assert wait_for(lambda: len(leaders(fired(client))) >= 2)
        assert time.monotonic() - killed < TTL + 5  # within the lease, generous slack
        assert wait_for(lambda: len(fired(client)) >= before + 10)
        succession = leaders(fired(client))
        assert succession[0] == (first, term)
        assert all(host != first for host, _ in succession[1:])  # the dead one never again
        terms = [t for _, t in succession]
        assert terms == sorted(set(terms))  # each leader a larger term: a fencing token
    finally:
        stop_all(procs)


def test_a_clean_stop_hands_over(server: RedisServer) -> None:
    client = server.client()
    procs = start(server, 2)
    try:
        assert wait_for(lambda: len(fired(client)) >= 5)
        (first, _), *_ = leaders(fired(client))
        procs[first].send_signal(signal.SIGTERM)  # resigns on its way out
        assert procs[first].wait(timeout=30) == 0
        assert wait_for(lambda: len(leaders(fired(client))) == 2)
    finally:
        stop_all(procs)


def test_twin_without_the_election_all_fire(server: RedisServer) -> None:
    client = server.client()
    procs = start(server, 3, "--no-election")
    try:
        assert wait_for(lambda: len({host for host, _ in fired(client)}) == 3)
    finally:
        stop_all(procs)
