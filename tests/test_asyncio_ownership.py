"""asyncio only: a held handle belongs to the handle, not to the task that ran ``acquire()``.

``asyncio.wait_for`` (a new task on 3.10/3.11), ``gather``, ``create_task`` awaited by its
creator and ``shield`` run the acquire in another task than the code that awaits it; that code
must be able to release. Each case also asserts that the acquiring task differs from the
releasing one: under the old per-task model that release raised ``LockNotOwned`` ("held by
another task") and the lease was renewed for as long as the handle lived.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from tests._async.test_ownership import KINDS, make

pytestmark = pytest.mark.timeout(60)


async def _wait_for(acquire: Callable[[], Awaitable[bool]]) -> bool:
    return await asyncio.wait_for(acquire(), 5)


async def _gather(acquire: Callable[[], Awaitable[bool]]) -> bool:
    (acquired,) = await asyncio.gather(acquire())
    return bool(acquired)


async def _create_task(acquire: Callable[[], Awaitable[bool]]) -> bool:
    return await asyncio.create_task(acquire())  # type: ignore[arg-type]


async def _shield(acquire: Callable[[], Awaitable[bool]]) -> bool:
    return await asyncio.shield(acquire())


async def _timeout(acquire: Callable[[], Awaitable[bool]]) -> bool:
    async with asyncio.timeout(5):  # type: ignore[attr-defined]  # 3.11+
        return await acquire()


IDIOMS = {"wait_for": _wait_for, "gather": _gather, "create_task": _create_task, "shield": _shield}
if sys.version_info >= (3, 11):
    IDIOMS["timeout"] = _timeout


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("idiom", sorted(IDIOMS))
async def test_the_code_that_awaited_the_acquire_releases(
    async_client: redis.asyncio.Redis,
    async_redlock_clients: list[redis.asyncio.Redis],
    kind: str,
    idiom: str,
) -> None:
    handle = make(kind, async_client, async_redlock_clients)
    assert await IDIOMS[idiom](handle.acquire)
    acquirer = handle.holding().owner
    # The twin: the release below comes from another task than the acquire, which the old
    # per-task model refused (asyncio.timeout, and wait_for from 3.12, stay in the caller's).
    same_task = idiom == "timeout" or (idiom == "wait_for" and sys.version_info >= (3, 12))
    assert (acquirer is asyncio.current_task()) is same_task
    assert await handle.owned()
    await handle.release()
    assert await handle.free()
    assert handle.holding() is None


async def test_another_task_may_release_extend_and_read_the_fence(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = redlease.Lock(async_client, "any-task", ttl=5.0)
    assert await asyncio.create_task(lock.acquire())  # type: ignore[arg-type]
    fence = lock.fence
    assert fence is not None

    async def elsewhere() -> tuple[int | None, bool]:
        await lock.extend(30.0)
        return lock.fence, await lock.owned()

    assert await asyncio.create_task(elsewhere()) == (fence, True)  # type: ignore[arg-type]
    remaining = await lock.remaining()
    assert remaining is not None and remaining > 20.0
    await lock.release()
    assert not await lock.locked()


async def test_another_task_waits_for_a_held_handle_instead_of_raising(
    async_client: redis.asyncio.Redis,
) -> None:
    """Only the task that acquired raises RuntimeError when it waits forever for its own
    lock; another task of the loop waits for it, as with ``asyncio.Lock``."""
    lock = redlease.Lock(async_client, "waits", ttl=5.0)
    assert await lock.acquire()
    with pytest.raises(RuntimeError, match="wait forever"):
        await lock.acquire(timeout=None)
    waiter = asyncio.create_task(lock.acquire(timeout=None))
    await asyncio.sleep(0.2)
    assert not waiter.done()  # waiting, not refused
    first = lock.fence
    await lock.release()
    assert await asyncio.wait_for(waiter, 10)
    assert (lock.fence or 0) > (first or 0)
    await lock.release()


async def test_rlock_reentry_is_per_task_and_release_from_any_task(
    async_client: redis.asyncio.Redis,
) -> None:
    """An RLock taken in another task is re-entered only by that task; the awaiting code
    may release it (each release undoes one acquisition made through this handle)."""
    lock = redlease.RLock(async_client, "reentry", ttl=5.0)

    async def twice() -> bool:
        return await lock.acquire() and await lock.acquire(timeout=0)  # re-entered

    assert await asyncio.create_task(twice())  # type: ignore[arg-type]
    assert await lock.acquire(timeout=0) is False  # this task did not acquire: contention
    await lock.release()
    assert await lock.owned()  # one acquisition left
    await lock.release()
    assert not await lock.locked()
    with pytest.raises(redlease.LockNotOwned, match="does not hold"):
        await lock.release()


async def test_tasks_sharing_a_read_handle_each_release_their_own_share(
    async_client: redis.asyncio.Redis,
) -> None:
    """Two tasks read through one handle; the first to leave gives back its own share, not
    the other's: it holds nothing after, so asking for the write lock is plain contention."""
    rw = redlease.ReadWriteLock(async_client, "shared-read", ttl=5.0)
    first_in, second_in, first_out = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def first() -> bool:
        async with rw.read:
            first_in.set()
            await second_in.wait()
        first_out.set()
        return await rw.write.acquire(timeout=0)  # the second still reads: False, no error

    async def second() -> None:
        await first_in.wait()
        async with rw.read:
            second_in.set()
            await first_out.wait()

    wrote, _ = await asyncio.gather(first(), second())
    assert wrote is False
    assert await rw.write.acquire(timeout=5)  # every share given back
    await rw.write.release()
