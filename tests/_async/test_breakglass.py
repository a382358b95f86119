"""Break-glass release against a real server: force_release of a lock, permits and a term
(asyncio; tests/_sync/test_breakglass.py is generated)."""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._core.lock import LockKeys
from tests._async.helpers import wait_until
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)

TTL = 4.0  # the evicted holder renews every TTL / 3; a waiter not told waits up to TTL


def lock_keys(name: str) -> LockKeys:
    return LockKeys.build("redlease", name.encode())


async def evict(
    client: redis.asyncio.Redis, name: str, breaking: Any
) -> tuple[int, list[int], dict[str, Any]]:
    """A holder (with on_lost) writes under its fence, a waiter queues, then ``breaking()``
    runs; the waiter takes the lock and writes under its own fence. Returns the evicted
    fence, the on_lost calls and what the waiter saw (when, which fence)."""
    store = redlease.FencedStore(client, name)
    lost: list[int] = []
    holder = redlease.Lock(client, name, ttl=TTL, on_lost=lambda: lost.append(1))
    assert await holder.acquire()
    evicted = holder.fence
    assert evicted is not None
    await store.write(evicted, "the holder's")
    waiter = redlease.Lock(client, name, ttl=TTL, timeout=30)
    seen: dict[str, Any] = {}

    async def wait() -> None:
        assert await waiter.acquire()
        seen["at"], seen["fence"] = time.monotonic(), waiter.fence
        await store.write(waiter.fence, "the waiter's")
        seen["late"] = await written(store, evicted)  # the evicted holder's late write
        await waiter.release()

    async def operate() -> None:
        inspect = redlease.Lock(client, name).inspect
        assert await wait_until(lambda: _waiting(inspect))
        seen["broken"] = time.monotonic()
        seen["result"] = await breaking()
        seen["early"] = await written(store, evicted)  # before the waiter wrote

    await AsyncTasks.gather(wait, operate)
    assert await wait_until(lambda: _true(bool(lost)), 3 * TTL)  # the watchdog found out
    with pytest.raises(redlease.LockLost):
        await holder.release()
    return evicted, lost, seen


async def _waiting(inspect: Any) -> bool:
    return bool((await inspect()).waiters)


async def _true(value: bool) -> bool:
    return value


async def written(store: Any, fence: int) -> bool:
    """Whether a write under ``fence`` is accepted (True) or refused as stale (False)."""
    try:
        await store.write(fence, "late")
    except redlease.StaleFence:
        return False
    return True


async def test_force_release_evicts_the_holder_and_grants_the_waiter_at_once(
    async_client: redis.asyncio.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="redlease")
    before = await redlease.Lock(async_client, "job").inspect()
    assert before.fence == 0

    async def force() -> redlease.ForceReleased:
        return await redlease.Lock.force_release(async_client, "job")

    evicted, lost, seen = await evict(async_client, "job", force)
    result = seen["result"]
    assert [h.pid for h in result.removed] == [os.getpid()]  # who was evicted
    assert evicted < result.fence < seen["fence"]  # the fence moved on, then the grant's
    assert seen["at"] - seen["broken"] < TTL / 2  # granted at once, not when the lease ends
    assert seen["late"] is False  # the evicted holder's fenced write is refused
    assert lost == [1]
    records = [r for r in caplog.records if getattr(r, "redlease_event", "") == "force_released"]
    assert len(records) == 1 and records[0].levelno == logging.WARNING
    assert records[0].redlease_fence == result.fence  # type: ignore[attr-defined]


async def test_twin_a_plain_del_moves_no_fence_and_lets_the_late_write_through(
    async_client: redis.asyncio.Redis,
) -> None:
    async def delete() -> int:
        return int(await async_client.delete(lock_keys("job").lock))

    _, lost, seen = await evict(async_client, "job", delete)
    assert seen["result"] == 1
    assert seen["early"] is True  # no fence moved: the evicted holder still writes
    assert seen["at"] - seen["broken"] > TTL / 4  # nobody told the waiter: it waited
    assert lost == [1]


async def test_force_release_of_a_free_lock_or_another_token_changes_nothing(
    async_client: redis.asyncio.Redis,
) -> None:
    free = await redlease.Lock.force_release(async_client, "idle")
    assert free.removed == () and free.fence == 0
    lock = redlease.Lock(async_client, "idle")
    assert await lock.acquire()
    other = await redlease.Lock.force_release(async_client, "idle", token="nobody.x")
    assert other.removed == () and await lock.owned()
    info = await lock.inspect()
    assert info.held_by is not None
    mine = await redlease.Lock.force_release(async_client, "idle", token=info.held_by.token)
    assert [h.token for h in mine.removed] == [info.held_by.token]
    assert not await lock.owned()
    with pytest.raises(ValueError, match="token"):
        await redlease.Lock.force_release(async_client, "idle", token="has space")
    with pytest.raises(TypeError, match="token"):
        await redlease.Lock.force_release(async_client, "idle", token=5)  # type: ignore[arg-type]


async def test_force_release_of_one_permit_or_all_wakes_the_waiter(
    async_client: redis.asyncio.Redis,
) -> None:
    lost: list[int] = []
    pool = redlease.Semaphore(async_client, "pool", 2, ttl=TTL, on_lost=lambda: lost.append(1))
    assert await pool.acquire() and await pool.acquire()
    info = await pool.inspect()
    first = info.held_by[0].token
    one = await redlease.Semaphore.force_release(async_client, "pool", token=first)
    assert [h.token for h in one.removed] == [first] and one.fence > info.fence
    assert (await pool.inspect()).used == 1
    assert await pool.acquire()  # full again
    waiter = redlease.Semaphore(async_client, "pool", 2, ttl=TTL, timeout=30)

    async def take() -> float:
        assert await waiter.acquire()
        taken = time.monotonic()
        await waiter.release()
        return taken

    async def force() -> float:
        assert await wait_until(lambda: _queued(waiter))
        forced = time.monotonic()
        result = await redlease.Semaphore.force_release(async_client, "pool")  # all
        assert len(result.removed) == 2
        return forced

    taken, forced = await AsyncTasks.gather(take, force)
    assert taken - forced < TTL / 2
    assert await wait_until(lambda: _true(len(lost) == 3), 3 * TTL)


async def _queued(sem: Any) -> bool:
    return bool((await sem.inspect()).waiters)


async def test_force_release_ends_a_term_and_the_next_candidate_leads(
    async_client: redis.asyncio.Redis,
) -> None:
    lost: list[int] = []
    leader = redlease.Election(async_client, "boss", ttl=TTL, on_lost=lambda: lost.append(1))
    assert await leader.campaign("a")
    term = leader.term
    assert term is not None
    candidate = redlease.Election(async_client, "boss", ttl=TTL)

    async def campaign() -> int | None:
        assert await candidate.campaign("b", timeout=30)
        new = candidate.term
        await candidate.resign()
        return new

    async def force() -> None:
        assert await wait_until(lambda: _candidates(candidate))
        result = await redlease.Election.force_release(async_client, "boss")
        assert len(result.removed) == 1 and result.fence > term

    new_term, _ = await AsyncTasks.gather(campaign, force)
    assert new_term is not None and new_term > term
    assert await wait_until(lambda: _true(lost == [1]), 3 * TTL)


async def _candidates(election: Any) -> bool:
    return bool((await election.inspect()).candidates)


async def test_force_release_of_a_read_write_lock(async_client: redis.asyncio.Redis) -> None:
    rw = redlease.ReadWriteLock(async_client, "rw", ttl=TTL)
    assert await rw.write.acquire()
    result = await redlease.ReadWriteLock.force_release(async_client, "rw")
    assert len(result.removed) == 1
    assert not (await rw.inspect()).writer
