"""Redlock waiters behind a dead queue head (asyncio; tests/_sync/test_redlock_turns.py is
generated): who checks that the reserved head takes its turn.

A waiter refused while the lock is reserved for the head checks when the reservation ends only
if it is right behind the head (acquire.lua's rank); further back it sleeps until told more
(the one ahead checks), or, if that one is dead too, until the lease it knows of (its ttl)
runs out, as docs/safety.md says.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._core import redlock as core
from redlease._core.lock import LEAVE, LockKeys
from redlease._fanout import AsyncFanOut
from redlease.server import RedisServer
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


async def hand_over_with_two_servers_hung(
    clients: list[redis.asyncio.Redis], servers: list[RedisServer]
) -> float:
    """A holds the lock, B waits (queued on all five), servers 3 and 4 hang, A releases: the
    seconds from A's release to B's acquire() returning True (B's grants from 3 and 4 are
    late). Then 3 and 4 resume, and every queue ends empty (B left the late ones' too).

    asyncio only: the sync fan-out opens a fresh connection to each hung server in turn
    (their connections are busy with A's late release), each with the client's connect
    timeout, before and after the round: a known cost (README), which here outlasts the
    lease (noted for the lead; it fails the same way without this change)."""
    if not AsyncTasks.ASYNC:
        pytest.skip("sync: fresh connections to hung servers cost a connect timeout each")
    a = redlease.Redlock(clients, "turns", server_timeout=3.0)
    b = redlease.Redlock(clients, "turns", server_timeout=3.0)
    held: list[bool] = []
    released: list[float] = []

    async def queued_everywhere() -> bool:
        return all([await c.zcard(KEYS.queue) == 1 for c in clients])

    async def a_holds() -> bool:
        return bool(held)

    async def waiter() -> float:
        assert await wait_until(a_holds)
        assert await b.acquire(timeout=30)
        took = time.monotonic() - released[0]
        await b.release()  # (returns at the majority: 3 and 4 release when they resume)
        return took

    async def driver() -> None:  # (a lock is released by the task that took it)
        assert await a.acquire()
        held.append(True)
        assert await wait_until(queued_everywhere)
        servers[3].pause()
        servers[4].pause()
        released.append(time.monotonic())
        await a.release()

    try:
        took, _ = await AsyncTasks.gather(waiter, driver)
    finally:
        servers[3].resume()
        servers[4].resume()

    async def queues_empty() -> bool:
        return all([await c.zcard(KEYS.queue) == 0 for c in clients])

    assert await wait_until(queues_empty)
    return float(took)


async def test_a_winner_does_not_wait_for_the_queues_of_late_servers(
    async_redlock_clients: list[Any], redlock_servers: list[RedisServer]
) -> None:
    """The winner leaves the queues of the servers whose grant is late behind its acquire
    there (on the same connection, not awaited): acquire() returns at the majority, not one
    ``server_timeout`` (3 s) later, and no queue keeps its token."""
    took = await hand_over_with_two_servers_hung(async_redlock_clients, redlock_servers)
    assert took < 1.5


async def test_twin_a_leave_round_waits_for_the_hung_servers(
    async_redlock_clients: list[Any],
    redlock_servers: list[RedisServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The twin: without the leave sent behind the late acquire, the winner leaves those
    queues in a round of its own before acquire() returns, and waits out its deadline there."""
    follow = AsyncFanOut.follow

    async def no_leave_behind(late: Any, script: Any, keys: Any, args: Any) -> bool:
        return False if script is LEAVE else await follow(late, script, keys, args)

    monkeypatch.setattr(AsyncFanOut, "follow", staticmethod(no_leave_behind))
    took = await hand_over_with_two_servers_hung(async_redlock_clients, redlock_servers)
    assert took >= 1.5
