"""The coordination family between real processes: each safety check, and its twin.

Every check is recorded in Redis by the workers themselves (a shared counter changed inside
the critical section) and judged here; each twin runs the same workers with the protection
removed, to show that the check would catch the bug.
"""

from __future__ import annotations

import asyncio
import itertools
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

pytestmark = pytest.mark.timeout(180)
SPAWN = multiprocessing.get_context("spawn")
WORKERS = 8

# Enter a critical section: count ourselves in, remember the most seen inside at once.
ENTER = """
local inside = redis.call('INCR', KEYS[1])
if inside > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], inside) end
return inside
"""


def run_workers(target: Any, args: tuple[Any, ...], n: int = WORKERS) -> None:
    start = SPAWN.Event()
    workers = [SPAWN.Process(target=target, args=(*args, start)) for _ in range(n)]
    for w in workers:
        w.start()
    start.set()
    for w in workers:
        w.join(120)
    assert all(w.exitcode == 0 for w in workers), [w.exitcode for w in workers]


# -- Semaphore: never more than N inside --------------------------------------------------------
PERMITS, ROUNDS = 3, 250


def use_permits(url: str, mode: str, guarded: bool, start: Any) -> None:
    if mode == "asyncio":
        asyncio.run(_use_permits_async(url, guarded, start))
        return
    client = redis.Redis.from_url(url)
    enter = client.register_script(ENTER)
    sem = redlease.Semaphore(client, "pool", PERMITS, ttl=5.0)
    start.wait(30)
    for _ in range(ROUNDS):
        if guarded:
            sem.acquire()
        enter(keys=["inside", "max"])
        time.sleep(0.0005)
        client.decr("inside")
        if guarded:
            sem.release()


async def _use_permits_async(url: str, guarded: bool, start: Any) -> None:
    client = redis.asyncio.Redis.from_url(url)
    enter = client.register_script(ENTER)
    sem = redlease.asyncio.Semaphore(client, "pool", PERMITS, ttl=5.0)
    start.wait(30)
    for _ in range(ROUNDS // 2):
        if guarded:
            await sem.acquire()
        await enter(keys=["inside", "max"])
        await asyncio.sleep(0.0005)
        await client.decr("inside")
        if guarded:
            await sem.release()
    await client.aclose()


def most_inside(server: RedisServer, mode: str, guarded: bool) -> int:
    client = server.client()
    client.flushall()
    run_workers(use_permits, (server.url, mode, guarded))
    assert int(client.get("inside") or 0) == 0
    return int(client.get("max") or 0)


@pytest.mark.parametrize("mode", ["sync", "asyncio"])
def test_never_more_than_n_permits_are_held(server: RedisServer, mode: str) -> None:
    most = most_inside(server, mode, guarded=True)
    assert 1 <= most <= PERMITS


def test_without_the_semaphore_more_than_n_are_inside(server: RedisServer) -> None:
    """The twin: the same workers without permits crowd in, so the check above can fail."""
    assert most_inside(server, "sync", guarded=False) > PERMITS


# -- SIGKILLed holders give back permits and read shares -----------------------------------------
def hold_until_killed(url: str, ttl: float, report: Any) -> None:
    client = redis.Redis.from_url(url)
    sem = redlease.Semaphore(client, "killed", 2, ttl=ttl)
    rw = redlease.ReadWriteLock(client, "killed-rw", ttl=ttl)
    assert sem.acquire() and sem.acquire() and rw.read.acquire()
    report.put("holding")
    time.sleep(60)  # bounded: killed long before


def kill_holder_then_take(server: RedisServer, ttl: float, timeout: float) -> bool:
    server.client().flushall()
    report = SPAWN.Queue()
    holder = SPAWN.Process(target=hold_until_killed, args=(server.url, ttl, report))
    holder.start()
    try:
        assert report.get(timeout=30) == "holding"
    finally:
        os.kill(holder.pid or 0, signal.SIGKILL)
        holder.join(10)
    client = server.client()
    sem = redlease.Semaphore(client, "killed", 2)
    rw = redlease.ReadWriteLock(client, "killed-rw")
    got = sem.acquire(timeout=timeout) and sem.acquire(timeout=timeout)
    got = got and rw.write.acquire(timeout=timeout)  # only once the read share is gone
    return bool(got)


def test_a_killed_holders_permits_and_read_share_come_back(server: RedisServer) -> None:
    assert kill_holder_then_take(server, ttl=1.0, timeout=10)  # a bound, not a timing claim


def test_a_killed_holders_permits_stay_taken_while_its_lease_runs(server: RedisServer) -> None:
    """The twin: with a lease far longer than the wait, nothing comes back in time."""
    assert not kill_holder_then_take(server, ttl=60.0, timeout=1.5)


# -- CountDownLatch: all N waiters released once, and only after the last count-down ------------
LATCH_WAITERS = 6


def wait_on_latch(url: str, mode: str, start: Any) -> None:
    if mode == "asyncio":
        asyncio.run(_wait_on_latch_async(url, start))
        return
    client = redis.Redis.from_url(url)
    latch = redlease.CountDownLatch(client, "gate")
    start.wait(30)
    client.incr("waiting")
    assert latch.wait(60)
    client.rpush("released", client.get("downs") or b"0")


async def _wait_on_latch_async(url: str, start: Any) -> None:
    client = redis.asyncio.Redis.from_url(url)
    latch = redlease.asyncio.CountDownLatch(client, "gate")
    start.wait(30)
    await client.incr("waiting")
    assert await latch.wait(60)
    await client.rpush("released", await client.get("downs") or b"0")
    await client.aclose()


def run_latch(server: RedisServer, mode: str, count: int, downs: int) -> list[int]:
    client = server.client()
    client.flushall()
    latch = redlease.CountDownLatch(client, "gate")
    assert latch.try_set_count(count)
    start = SPAWN.Event()
    workers = [
        SPAWN.Process(target=wait_on_latch, args=(server.url, mode, start))
        for _ in range(LATCH_WAITERS)
    ]
    for w in workers:
        w.start()
    start.set()
    for _ in range(300):  # bounded: until every waiter is waiting
        if int(client.get("waiting") or 0) == LATCH_WAITERS:
            break
        time.sleep(0.1)
    time.sleep(0.3)
    for _ in range(downs):
        client.incr("downs")  # before the count-down: a waiter released early sees fewer
        latch.count_down()
        time.sleep(0.05)
    for w in workers:
        w.join(60)
    assert all(w.exitcode == 0 for w in workers), [w.exitcode for w in workers]
    return [int(x) for x in client.lrange("released", 0, -1)]


@pytest.mark.parametrize("mode", ["sync", "asyncio"])
def test_a_latch_releases_every_waiter_once_after_the_last_count_down(
    server: RedisServer, mode: str
) -> None:
    released = run_latch(server, mode, count=4, downs=4)
    assert released == [4] * LATCH_WAITERS  # each once, none before the 4th count-down


def test_a_latch_set_one_short_releases_early(server: RedisServer) -> None:
    """The twin: a latch that opens one count-down early is caught by the same check."""
    released = run_latch(server, "sync", count=3, downs=4)
    assert len(released) == LATCH_WAITERS and min(released) < 4


# -- Election: one leader at a time, terms strictly increase ------------------------------------
TERMS = 15
HOLD = 0.002
TWIN_HOLD = 0.02
"""The twin's leaders hold their term longer: unelected, 6 workers of 15 short terms each did
not always overlap on a loaded 2-core machine (a fresh-clone CI run saw at most one at once)."""
# asyncio twins: fewer processes (spawning is the cost), each an event loop running TASKS tasks.
TASKS, ASYNC_PROCESSES, ASYNC_TERMS, ASYNC_RW_ROUNDS = 2, 4, 4, 20  # the last two per task


def campaign_loop(url: str, mode: str, elect: bool, start: Any) -> None:
    if mode == "asyncio":
        asyncio.run(_campaign_tasks(url, elect, start))
        return
    client = redis.Redis.from_url(url)
    enter = client.register_script(ENTER)
    election = redlease.Election(client, "boss", ttl=5.0)
    start.wait(30)
    for _ in range(TERMS):
        if elect:
            assert election.campaign(f"pid-{os.getpid()}", timeout=60)
        enter(keys=["leaders", "most"])
        client.rpush("terms", election.term or 0)
        time.sleep(HOLD if elect else TWIN_HOLD)
        client.decr("leaders")
        if elect:
            election.resign()


async def _campaign_tasks(url: str, elect: bool, start: Any) -> None:
    """One event loop per process, TASKS campaigning tasks in it (each its own Election)."""
    client = redis.asyncio.Redis.from_url(url)
    enter = client.register_script(ENTER)
    start.wait(30)

    async def campaign(task: int) -> None:
        election = redlease.asyncio.Election(client, "boss", ttl=5.0)
        for _ in range(ASYNC_TERMS):
            if elect:
                assert await election.campaign(f"pid-{os.getpid()}.{task}", timeout=60)
            await enter(keys=["leaders", "most"])
            await client.rpush("terms", election.term or 0)
            await asyncio.sleep(HOLD if elect else TWIN_HOLD)
            await client.decr("leaders")
            if elect:
                await election.resign()

    await asyncio.gather(*(campaign(t) for t in range(TASKS)))
    await client.aclose()


def run_election(server: RedisServer, mode: str, elect: bool) -> tuple[int, list[int]]:
    client = server.client()
    client.flushall()
    run_workers(
        campaign_loop, (server.url, mode, elect), n=6 if mode == "sync" else ASYNC_PROCESSES
    )
    return int(client.get("most") or 0), [int(t) for t in client.lrange("terms", 0, -1)]


@pytest.mark.parametrize("mode", ["sync", "asyncio"])
def test_one_leader_at_a_time_with_increasing_terms(server: RedisServer, mode: str) -> None:
    most, terms = run_election(server, mode, elect=True)
    assert most == 1
    assert len(terms) == (6 * TERMS if mode == "sync" else ASYNC_PROCESSES * TASKS * ASYNC_TERMS)
    assert all(a < b for a, b in itertools.pairwise(terms))


@pytest.mark.parametrize("mode", ["sync", "asyncio"])
def test_without_the_election_several_lead_at_once(server: RedisServer, mode: str) -> None:
    """The twin: the same workers, each acting as leader unelected, are caught."""
    most, terms = run_election(server, mode, elect=False)
    assert most > 1
    assert not all(a < b for a, b in itertools.pairwise(terms))


def lead_and_report(url: str, ttl: float, report: Any) -> None:
    client = redis.Redis.from_url(url)
    events: list[str] = []
    election = redlease.Election(client, "paused", ttl=ttl, on_lost=lambda: events.append("lost"))
    assert election.campaign("frozen")
    report.put(("term", election.term))
    for _ in range(600):  # bounded: 60 s at most
        if events:
            break
        time.sleep(0.1)
    try:
        election.resign()
        report.put(("resigned", None))
    except redlease.LeadershipLost:
        report.put(("LeadershipLost", events))


def test_a_leader_paused_past_its_lease_learns_it_lost(server: RedisServer) -> None:
    report = SPAWN.Queue()
    leader = SPAWN.Process(target=lead_and_report, args=(server.url, 0.6, report))
    leader.start()
    kind, term = report.get(timeout=30)
    assert kind == "term"
    os.kill(leader.pid or 0, signal.SIGSTOP)
    try:
        election = redlease.Election(server.client(), "paused")
        assert election.campaign("next", timeout=10)  # the lease ran out while frozen
        assert (election.term or 0) > term
    finally:
        os.kill(leader.pid or 0, signal.SIGCONT)
    assert report.get(timeout=30) == ("LeadershipLost", ["lost"])
    leader.join(10)
    assert election.leader() == ("next", election.term)  # it did not unseat the new leader
    election.resign()


# -- ReadWriteLock: readers share, a writer is alone ---------------------------------------------
# Count ourselves in as a reader or writer and count a violation if the other kind is inside.
RW_ENTER = """
local mine = redis.call('INCR', KEYS[1])
local others = tonumber(redis.call('GET', KEYS[2]) or '0')
if others > 0 or (KEYS[1] == 'writers' and mine > 1) then redis.call('INCR', 'violations') end
if KEYS[1] == 'readers' and mine > tonumber(redis.call('GET', 'most') or '0') then
  redis.call('SET', 'most', mine)
end
"""
RW_ROUNDS = 60


def read_and_write(url: str, mode: str, guarded: bool, start: Any) -> None:
    if mode == "asyncio":
        asyncio.run(_read_and_write_tasks(url, guarded, start))
        return
    client = redis.Redis.from_url(url)
    enter = client.register_script(RW_ENTER)
    rw = redlease.ReadWriteLock(client, "table", ttl=5.0)
    start.wait(30)
    for i in range(RW_ROUNDS):
        writing = i % 4 == 0
        side = rw.write if writing and guarded else rw.read
        kind = "writers" if writing else "readers"
        other = "readers" if writing else "writers"
        with side:
            enter(keys=[kind, other])
            time.sleep(0.002)
            client.decr(kind)


async def _read_and_write_tasks(url: str, guarded: bool, start: Any) -> None:
    """One event loop per process, TASKS tasks in it sharing one ReadWriteLock (holds belong
    to the task), so readers and writers also meet inside the process."""
    client = redis.asyncio.Redis.from_url(url)
    enter = client.register_script(RW_ENTER)
    rw = redlease.asyncio.ReadWriteLock(client, "table", ttl=5.0)
    start.wait(30)

    async def loop(task: int) -> None:
        for i in range(ASYNC_RW_ROUNDS):
            writing = (i + task) % 4 == 0
            side = rw.write if writing and guarded else rw.read
            kind = "writers" if writing else "readers"
            other = "readers" if writing else "writers"
            async with side:
                await enter(keys=[kind, other])
                await asyncio.sleep(0.002)
                await client.decr(kind)

    await asyncio.gather(*(loop(t) for t in range(TASKS)))
    await client.aclose()


def rw_violations(server: RedisServer, mode: str, guarded: bool) -> tuple[int, int]:
    client = server.client()
    client.flushall()
    run_workers(
        read_and_write, (server.url, mode, guarded), WORKERS if mode == "sync" else ASYNC_PROCESSES
    )
    return int(client.get("violations") or 0), int(client.get("most") or 0)


@pytest.mark.parametrize("mode", ["sync", "asyncio"])
def test_readers_share_and_writers_are_alone(server: RedisServer, mode: str) -> None:
    violations, most_readers = rw_violations(server, mode, guarded=True)
    assert violations == 0
    assert most_readers >= 1


@pytest.mark.parametrize("mode", ["sync", "asyncio"])
def test_writers_taking_read_shares_are_caught(server: RedisServer, mode: str) -> None:
    """The twin: writers that take only a read share overlap readers, and the checker sees it."""
    violations, _ = rw_violations(server, mode, guarded=False)
    assert violations > 0
