"""Redlock waiters behind a dead queue head (asyncio; tests/_sync/test_redlock_turns.py is
generated): who checks that the reserved head takes its turn.

A waiter refused while the lock is reserved for the head checks when the reservation ends only
if it is right behind the head (acquire_reserving.lua's rank); further back it sleeps until
told more (the one ahead checks), or, if that one is dead too, until the lease it knows of (its ttl)
runs out, as docs/safety.md says.

A waiter that undoes a split vote keeps its place in every server's queue (release.lua
``requeue``), so that all the servers reserve the lock for the same head.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._core import redlock as core
from redlease._core import redlock_argv
from redlease._core.lock import LockKeys
from tests._async.helpers import wait_until
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)
KEYS = LockKeys.build("redlease", b"turns")


async def reserved_for_the_dead(clients: list[redis.asyncio.Redis], *dead: bytes) -> None:
    """A holder releases with ``dead`` queued ahead of everyone: the lock is reserved for the
    first of them (0.6 s, the holder's hand-off window), whose process does not listen."""
    holder = redlease.Redlock(clients, "turns", ttl=4.0, handoff=0.6, server_timeout=1.0)
    assert await holder.acquire()
    for client in clients:
        await client.zadd(KEYS.queue, {token: i + 1 for i, token in enumerate(dead)})
    await holder.release()


async def test_a_waiter_right_behind_a_dead_head_skips_it_when_its_turn_ends(
    async_redlock_clients: list[Any],
) -> None:
    """Joined behind the reserved dead head (rank 1), the waiter checks when the reservation
    ends (0.6 s) and takes the lock, long before its fallback (the ttl, 4 s)."""
    await reserved_for_the_dead(async_redlock_clients, b"deadproc.head")
    waiter = redlease.Redlock(async_redlock_clients, "turns", ttl=4.0, server_timeout=1.0)
    assert await waiter.acquire(timeout=2.5)
    await waiter.release()


async def test_twin_a_waiter_that_ignores_its_place_sleeps_through_the_turn(
    async_redlock_clients: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The twin: read every place as far back (nobody watches the dead head) and the same
    waiter sleeps until its fallback, past its timeout: the test above catches it."""
    monkeypatch.setattr(core, "_far_back", lambda reply: True)
    await reserved_for_the_dead(async_redlock_clients, b"deadproc.head")
    waiter = redlease.Redlock(async_redlock_clients, "turns", ttl=4.0, server_timeout=1.0)
    assert not await waiter.acquire(timeout=2.5)


async def test_behind_two_dead_waiters_the_lease_bounds_the_wait(
    async_redlock_clients: list[Any],
) -> None:
    """Behind a dead head and a dead second, nobody is told to check: the waiter (rank 2)
    tries when the lease it knows of runs out (its ttl, 1.5 s here), skips both, takes it."""
    await reserved_for_the_dead(async_redlock_clients, b"deadproc.head", b"deadproc.second")
    waiter = redlease.Redlock(async_redlock_clients, "turns", ttl=1.5, server_timeout=0.5)
    assert await waiter.acquire(timeout=10.0)
    await waiter.release()


async def split_vote(clients: list[redis.asyncio.Redis]) -> tuple[bool, list[list[Any]]]:
    """A holder over servers 1-3 keeps the lock there; a waiter over all five is granted it
    on servers 0 and 4 only (a split vote), undoes that, and waits. Returns whether it got the
    lock once the holder released, and every server's queue while it waited."""
    holder = redlease.Redlock(clients[1:4], "turns", ttl=10.0, server_timeout=1.0)
    waiter = redlease.Redlock(clients, "turns", ttl=4.0, server_timeout=1.0)
    queues: list[list[Any]] = []

    async def held() -> bool:
        return bool(await clients[3].exists(KEYS.lock))

    async def wait() -> bool:
        assert await wait_until(held)
        got = await waiter.acquire(timeout=10.0)
        if got:
            await waiter.release()
        return got

    async def undone() -> bool:  # queued where refused, no longer holding where granted
        return bool(
            await clients[1].zcard(KEYS.queue)
            and not await clients[0].exists(KEYS.lock)
            and not await clients[4].exists(KEYS.lock)
        )

    async def watch() -> None:
        assert await holder.acquire()
        assert await wait_until(undone)
        await AsyncTasks.sleep(0.5)  # (it sleeps now: until the holder's release wakes it)
        queues.extend([await c.zrange(KEYS.queue, 0, -1, withscores=True) for c in clients])
        await holder.release()

    got, _ = await AsyncTasks.gather(wait, watch)
    return got, queues


async def test_a_split_vote_keeps_the_waiter_in_every_servers_queue(
    async_redlock_clients: list[Any],
) -> None:
    """Undoing the split, the waiter is queued on the servers that granted it too, under the
    same ticket: every server has the same queue, so all reserve the lock for the same head.
    (A crowd arriving at once splits on every server; with queues that differ, the servers
    kept reserving the lock for different heads, and the votes kept splitting: 2 benchmark
    runs of 6, 16 processes on 5 servers, made no acquisition in 3 s.)"""
    got, queues = await split_vote(async_redlock_clients)
    assert got
    assert len(queues[1]) == 1
    assert all(queue == queues[1] for queue in queues), queues


async def test_twin_a_split_vote_that_does_not_requeue_leaves_the_queues_apart(
    async_redlock_clients: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The twin: an undo that only releases leaves the waiter out of the queues of the servers
    that granted it: the test above catches it."""
    monkeypatch.setattr(redlock_argv, "requeue", lambda ticket, ttl_ms: "")
    got, queues = await split_vote(async_redlock_clients)
    assert got
    assert len(queues[1]) == 1
    assert queues[0] == [] and queues[4] == [], queues
