"""One name, several primitives: a Lock and a Semaphore of the same name never touch each
other's keys (asyncio; tests/_sync/test_key_spaces.py is generated).

Each scenario has a twin that gives the semaphore the layout before (its keys without its
kind, built by hand): there the two share ``:queue`` and ``:fence``, and the interference is
seen in Redis.
"""

from __future__ import annotations

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._core.lock import LockKeys
from redlease._core.semaphore import semaphore_keys
from redlease._core.shared import SharedKeys
from tests._async.helpers import wait_until
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)

_OLD = ("holders", "units", "queue", "granted", "fence", "capacity", "payload", "watchers")


def semaphore(client: redis.asyncio.Redis, name: str, old_layout: bool) -> redlease.Semaphore:
    """A one-permit semaphore; with ``old_layout``, on the keys it had before (no kind)."""
    sem = redlease.Semaphore(client, name, 1, ttl=30.0)
    if old_layout:
        sem._keys = SharedKeys(*(f"redlease:{{{name}}}:{suffix}".encode() for suffix in _OLD))
    return sem


@pytest.mark.parametrize("old_layout", [False, True], ids=["own-keys", "twin-shared-keys"])
async def test_a_semaphore_does_not_empty_a_locks_queue(
    async_client: redis.asyncio.Redis, old_layout: bool
) -> None:
    """A Lock's waiter queued; a Semaphore of the same name is taken and given back; the
    lock's release then hands the lock to its waiter at once, not when the old lease ends."""
    name = "y"
    keys = LockKeys.build("redlease", name.encode())
    holder = redlease.Lock(async_client, name, ttl=30.0)
    waiter = redlease.Lock(async_client, name, ttl=30.0)

    async def wait() -> bool:
        assert await wait_until(lambda: _exists(async_client, keys.lock))
        # Far less than the holder's lease: it gets the lock only if the release grants it.
        got = await waiter.acquire(timeout=3.0 if old_layout else 15.0)
        if got:
            await waiter.release()
        return got

    async def meddle() -> int:
        assert await holder.acquire()
        assert await wait_until(lambda: _size(async_client, keys.queue, 1))
        sem = semaphore(async_client, name, old_layout)
        assert await sem.acquire(timeout=5.0)
        await sem.release()
        left = int(await async_client.zcard(keys.queue))
        await holder.release()
        return left

    got, left = await AsyncTasks.gather(wait, meddle)
    if old_layout:
        assert left == 0  # the semaphore took the lock's waiter off its queue
        return
    assert left == 1 and got is True


@pytest.mark.parametrize("old_layout", [False, True], ids=["own-keys", "twin-shared-keys"])
async def test_a_lock_does_not_take_a_semaphore_waiters_place(
    async_client: redis.asyncio.Redis, old_layout: bool
) -> None:
    """A Semaphore's waiter queued; a Lock of the same name is taken and released; the
    semaphore's waiter keeps its place and gets the permit when its holder gives it back."""
    name = "z"
    holder = semaphore(async_client, name, old_layout)
    waiter = semaphore(async_client, name, old_layout)
    queue = waiter._keys.queue
    assert (queue == semaphore_keys("redlease", b"z").queue) is not old_layout

    async def wait() -> bool:
        assert await wait_until(lambda: _size(async_client, waiter._keys.holders, 1))
        got = await waiter.acquire(timeout=3.0 if old_layout else 15.0)
        if got:
            await waiter.release()
        return got

    async def meddle() -> tuple[bool, int]:
        assert await holder.acquire()
        assert await wait_until(lambda: _size(async_client, queue, 1))
        lock = redlease.Lock(async_client, name, ttl=5.0)
        took = await lock.acquire(blocking=False)
        if took:
            await lock.release()
        left = int(await async_client.zcard(queue))
        await holder.release()
        return took, left

    got, (took, left) = await AsyncTasks.gather(wait, meddle)
    if old_layout:
        # The lock, free, refused itself: it "granted" itself to the semaphore's waiter (which
        # may have queued again by the time the queue is read, so only the refusal is sure).
        assert took is False
        return
    assert (took, left, got) == (True, 1, True)


async def _exists(client: redis.asyncio.Redis, key: bytes) -> bool:
    return int(await client.exists(key)) == 1


async def _size(client: redis.asyncio.Redis, key: bytes, n: int) -> bool:
    return int(await client.zcard(key)) == n


async def test_a_lock_and_an_rlock_of_one_name_are_one_lock(
    async_client: redis.asyncio.Redis,
) -> None:
    """By design Lock and RLock share their keys (an RLock is a Lock its owner may take
    again): each excludes the other, and a Semaphore of the name is independent of both."""
    lock = redlease.Lock(async_client, "one", ttl=10.0)
    assert await lock.acquire()
    assert not await AsyncTasks.run(lambda: redlease.RLock(async_client, "one").acquire(False))
    sem = redlease.Semaphore(async_client, "one", 1, ttl=10.0)
    assert await AsyncTasks.run(lambda: _take_and_give(sem))
    await lock.release()
    rlock = redlease.RLock(async_client, "one", ttl=10.0)
    assert await rlock.acquire()
    assert not await AsyncTasks.run(lambda: redlease.Lock(async_client, "one").acquire(False))
    await rlock.release()


async def _take_and_give(sem: redlease.Semaphore) -> bool:
    got = await sem.acquire(blocking=False)
    if got:
        await sem.release()
    return got
