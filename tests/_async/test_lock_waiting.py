"""Lock waiters against a real server: queue order, hand-offs, wake-ups, idle waits
(asyncio; tests/_sync/test_lock_waiting.py is generated)."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._async.runtime import runtime_for
from tests._async.helpers import wait_until
from tests._async.lock_helpers import hold_until, keys, queued
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)


# -- waiting --------------------------------------------------------------------------------


async def test_waiters_are_served_in_queue_order(async_client: redis.asyncio.Redis) -> None:
    holder = redlease.Lock(async_client, "fifo")
    order: list[int] = []

    def waiter(i: int) -> Any:
        async def run() -> None:
            assert await wait_until(holder.locked)
            assert await wait_until(queued(async_client, "fifo", i))  # join in order i
            async with redlease.Lock(async_client, "fifo", timeout=20):
                order.append(i)

        return run

    await AsyncTasks.gather(
        hold_until(holder, queued(async_client, "fifo", 5)), *(waiter(i) for i in range(5))
    )
    assert order == [0, 1, 2, 3, 4]


async def test_a_dead_queue_head_is_skipped(async_client: redis.asyncio.Redis) -> None:
    """A waiter that died in the queue costs the others one hand-off window, not a hang."""
    holder = redlease.Lock(async_client, "dead", handoff=0.05)
    waiter = redlease.Lock(async_client, "dead", handoff=0.05)

    async def wait() -> bool:
        assert await wait_until(holder.locked)
        await async_client.zadd(keys("dead").queue, {b"crashed-waiter": 0})
        acquired = await waiter.acquire(timeout=10)
        await waiter.release()
        return acquired

    results = await AsyncTasks.gather(wait, hold_until(holder, queued(async_client, "dead", 2)))
    assert results[0] is True
    assert await async_client.zcard(keys("dead").queue) == 0


async def test_a_waiter_gets_the_lock_when_the_lease_ends_without_release(
    async_client: redis.asyncio.Redis,
) -> None:
    crashed = redlease.Lock(async_client, "crash", ttl=0.3, renew=False)
    await crashed.acquire()  # and never released: as if its process died
    waiter = redlease.Lock(async_client, "crash")

    async def wait() -> int:
        assert await waiter.acquire(timeout=10)
        fence = waiter.fence or 0
        await waiter.release()
        return fence

    assert await AsyncTasks.run(wait) > (crashed.fence or 0)


@pytest.mark.parametrize("linger", [1.0, 0.0])
async def test_a_crowd_of_waiters_loses_no_wake_up(
    async_client: redis.asyncio.Redis, linger: float
) -> None:
    """Eight handles on one lock, all waiting at once from a process that never waited before.

    With a 30 s lease and a 20 s timeout, one lost wake-up fails the test: the waiter would
    sleep until the lease runs out. ``linger=0`` makes the hub stop listening as soon as it
    has no waiter, the race in which a turn used to go unheard.
    """
    runtime_for(async_client).hub._linger = linger
    done: list[int] = []

    def worker(i: int) -> Any:
        async def run() -> None:
            lock = redlease.Lock(async_client, "crowd", ttl=30.0)
            for _ in range(5):
                assert await lock.acquire(timeout=20)
                await lock.release()
            done.append(i)

        return run

    await AsyncTasks.gather(*(worker(i) for i in range(8)))
    assert sorted(done) == list(range(8))


async def test_a_blocked_waiter_sends_no_commands(async_quiet_client: redis.asyncio.Redis) -> None:
    holder = redlease.Lock(async_quiet_client, "idle", ttl=10)
    await holder.acquire()
    waiter = redlease.Lock(async_quiet_client, "idle")
    counted: list[int] = []

    async def wait() -> bool:
        return await waiter.acquire(timeout=1.5)

    async def count() -> None:
        await AsyncTasks.sleep(0.4)  # the waiter is queued and asleep by now
        before = await _processed(async_quiet_client)
        await AsyncTasks.sleep(1.0)
        counted.append(await _processed(async_quiet_client) - before - 1)  # minus our INFO

    results = await AsyncTasks.gather(wait, count)
    assert results[0] is False
    assert counted == [0]
    await holder.release()


async def _processed(client: redis.asyncio.Redis) -> int:
    return int((await client.info("stats"))["total_commands_processed"])
