"""Exclusion between real processes, and what happens when a holder dies or pauses."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import time
from typing import Any

import pytest
import redis
import redis.asyncio

import redlease
import redlease.asyncio
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(120)
SPAWN = multiprocessing.get_context("spawn")
WORKERS, INCREMENTS = 8, 200
SHORTER = 100  # Redlock (five servers) and barging: half the count, same evidence, half the time


def count_with_get_set(
    urls: list[str], mode: str, locked: bool, start: Any, increments: int = INCREMENTS
) -> None:
    """One worker: INCREMENTS read-modify-writes of a shared counter (GET, then SET).

    The counter lives on the first server; with several URLs the lock is a Redlock over all.
    """
    if mode == "asyncio":
        asyncio.run(_count_async(urls, locked, start, increments))
        return
    clients = [redis.Redis.from_url(u) for u in urls]
    client = clients[0]
    lock: Any = (
        redlease.Lock(client, "counter", ttl=5.0, fair=mode != "barging")
        if len(urls) == 1
        else redlease.Redlock(clients, "counter", ttl=5.0, server_timeout=0.5)
    )
    start.wait(30)
    for _ in range(increments):
        if locked:
            lock.acquire()
        value = int(client.get("counter") or 0)
        time.sleep(0.0002)  # a realistic gap between the read and the write
        client.set("counter", value + 1)
        if locked:
            lock.release()


async def _count_async(urls: list[str], locked: bool, start: Any, increments: int) -> None:
    clients = [redis.asyncio.Redis.from_url(u) for u in urls]
    client = clients[0]
    lock: Any = (
        redlease.asyncio.Lock(client, "counter", ttl=5.0)
        if len(urls) == 1
        else redlease.asyncio.Redlock(clients, "counter", ttl=5.0, server_timeout=0.5)
    )
    start.wait(30)
    for _ in range(increments):
        if locked:
            await lock.acquire()
        value = int(await client.get("counter") or 0)
        await asyncio.sleep(0.0002)
        await client.set("counter", value + 1)
        if locked:
            await lock.release()
    for c in clients:
        await c.aclose()


def run_counter(
    servers: list[RedisServer], mode: str, locked: bool, increments: int = INCREMENTS
) -> int:
    for srv in servers:
        with srv.client() as c:
            c.flushall()
    client = servers[0].client()
    urls = [srv.url for srv in servers]
    start = SPAWN.Event()
    workers = [
        SPAWN.Process(target=count_with_get_set, args=(urls, mode, locked, start, increments))
        for _ in range(WORKERS)
    ]
    for w in workers:
        w.start()
    start.set()
    for w in workers:
        w.join(90)
    assert all(w.exitcode == 0 for w in workers), [w.exitcode for w in workers]
    return int(client.get("counter") or 0)


@pytest.mark.parametrize("mode", ["sync", "asyncio", "barging"])
def test_lock_makes_read_modify_write_exact(server: RedisServer, mode: str) -> None:
    increments = SHORTER if mode == "barging" else INCREMENTS
    assert run_counter([server], mode, True, increments) == WORKERS * increments


@pytest.mark.parametrize("mode", ["sync", "asyncio"])
def test_redlock_makes_read_modify_write_exact(
    redlock_servers: list[RedisServer], mode: str
) -> None:
    assert run_counter(redlock_servers, mode, True, SHORTER) == WORKERS * SHORTER


@pytest.mark.parametrize("mode", ["sync", "asyncio"])
def test_without_the_lock_updates_are_lost(server: RedisServer, mode: str) -> None:
    """The twin: the same workers without the lock lose updates, so the tests above can fail."""
    assert run_counter([server], mode, locked=False) < WORKERS * INCREMENTS


def hold_and_report(url: str, name: str, ttl: float, report: Any) -> None:
    """Hold the lock, report its fence, then keep working until killed or told it was lost."""
    client = redis.Redis.from_url(url)
    events: list[str] = []
    lock = redlease.Lock(client, name, ttl=ttl, on_lost=lambda: events.append("lost"))
    lock.acquire()
    report.put(("fence", lock.fence))
    for _ in range(600):  # bounded: 60 s at most
        if events:
            break
        time.sleep(0.1)
    try:
        lock.release()
        report.put(("released", None))
    except redlease.LockLost:
        report.put(("LockLost", events))


def test_a_killed_holder_frees_the_lock_within_its_lease(server: RedisServer) -> None:
    report = SPAWN.Queue()
    holder = SPAWN.Process(target=hold_and_report, args=(server.url, "killed", 1.0, report))
    holder.start()
    kind, fence = report.get(timeout=30)
    assert kind == "fence"
    os.kill(holder.pid or 0, signal.SIGKILL)
    holder.join(10)
    lock = redlease.Lock(server.client(), "killed")
    assert lock.acquire(timeout=10)  # bound, not a timing claim: the lease is 1 s
    assert (lock.fence or 0) > fence
    lock.release()


def test_a_holder_paused_past_its_lease_learns_it_lost_the_lock(server: RedisServer) -> None:
    report = SPAWN.Queue()
    holder = SPAWN.Process(target=hold_and_report, args=(server.url, "paused", 0.6, report))
    holder.start()
    kind, fence = report.get(timeout=30)
    assert kind == "fence"
    os.kill(holder.pid or 0, signal.SIGSTOP)  # a GC pause, a swap storm, a VM migration...
    try:
        lock = redlease.Lock(server.client(), "paused")
        assert lock.acquire(timeout=10)  # the lease ran out while the holder was frozen
        assert (lock.fence or 0) > fence  # a fenced store would reject the paused holder
    finally:
        os.kill(holder.pid or 0, signal.SIGCONT)
    assert report.get(timeout=30) == ("LockLost", ["lost"])  # it was told, twice
    holder.join(10)
    assert lock.owned()  # and it did not delete the new holder's lock
    lock.release()
