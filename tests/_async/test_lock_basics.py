"""Lock and RLock against a real server: acquire, release, inspect, extend, re-entry
(asyncio; tests/_sync/test_lock_basics.py is generated)."""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from tests._async.helpers import wait_until
from tests._async.lock_helpers import keys
from tests.support import AsyncTasks
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(60)


# -- the basics -----------------------------------------------------------------------------
async def test_acquire_release_and_state(async_client: redis.asyncio.Redis) -> None:
    lock = redlease.Lock(async_client, "orders:42", ttl=10.0)
    assert lock.fence is None
    assert await lock.remaining() is None
    assert not await lock.owned()
    assert not await lock.locked()

    assert await lock.acquire()
    assert lock.fence is not None and lock.fence > 0
    assert await lock.owned()
    assert await lock.locked()
    remaining = await lock.remaining()
    assert remaining is not None and 0 < remaining <= 10.0
    assert await async_client.get(keys("orders:42").lock) is not None

    await lock.release()
    assert lock.fence is None
    assert not await lock.locked()
    assert await async_client.exists(keys("orders:42").lock) == 0


async def test_inspect_is_one_typed_snapshot(async_client: redis.asyncio.Redis) -> None:
    lock = redlease.Lock(async_client, "snap", ttl=10.0)
    free = await lock.inspect()
    assert free == redlease.LockInfo(
        name="snap", held=False, mine=False, remaining=None, fence=0, waiters=0
    )
    assert await lock.acquire()
    other = redlease.Lock(async_client, "snap", ttl=10.0)
    held = await lock.inspect()
    seen = await AsyncTasks.run(other.inspect)
    assert held.held and held.mine and held.fence == lock.fence and held.waiters == 0
    assert held.remaining is not None and 0 < held.remaining <= 10.0
    assert seen.held and not seen.mine and seen.fence == lock.fence
    await lock.release()


@pytest.mark.parametrize(
    ("key", "write"),
    [
        ("lock", lambda c, k: c.hset(k, "f", "v")),
        ("fence", lambda c, k: c.set(k, "not a number")),
        ("queue", lambda c, k: c.set(k, "x")),
        ("handoff", lambda c, k: c.rpush(k, "x")),
    ],
)
async def test_inspect_names_a_key_holding_foreign_data(
    async_client: redis.asyncio.Redis, key: str, write: Any
) -> None:
    target = getattr(keys("alien"), key)
    await write(async_client, target)
    with pytest.raises(redlease.ForeignData, match=target.decode()) as caught:
        await redlease.Lock(async_client, "alien").inspect()
    assert caught.value.key == target


async def test_context_manager_and_not_acquired(async_client: redis.asyncio.Redis) -> None:
    holder = redlease.Lock(async_client, "ctx")
    async with holder as held:
        assert held.lock is holder and held.name == "ctx"
        assert held.fence == holder.fence  # held.fence is typed int, lock.fence int | None
        assert held.fence > 0
        other = redlease.Lock(async_client, "ctx", timeout=0.1)

        async def enter() -> None:
            async with other:
                raise AssertionError("entered a held lock")  # pragma: no cover

        with pytest.raises(redlease.NotAcquired, match="ctx"):
            await AsyncTasks.run(enter)
    assert not await holder.locked()


async def test_a_refused_with_says_how_long_it_waited(async_client: redis.asyncio.Redis) -> None:
    holder = redlease.Lock(async_client, "waited")
    assert await holder.acquire()
    sem = redlease.Semaphore(async_client, "waited-sem", 1)
    assert await sem.acquire()
    cases = [
        (
            redlease.Lock(async_client, "waited", timeout=0),
            r"held by another \(tried once: timeout 0\)",
        ),
        (redlease.Lock(async_client, "waited", timeout=0.05), r"for the whole timeout \(0.05 s\)"),
        (
            redlease.Semaphore(async_client, "waited-sem", 1, timeout=0),
            r"free \(tried once: timeout 0\)",
        ),
    ]
    for handle, message in cases:

        async def enter(handle: Any = handle) -> None:
            async with handle:
                raise AssertionError("entered")  # pragma: no cover

        with pytest.raises((redlease.NotAcquired, redlease.NoPermit), match=message):
            await AsyncTasks.run(enter)
    await holder.release()
    await sem.release()


async def test_non_blocking_and_zero_timeout_try_once(async_client: redis.asyncio.Redis) -> None:
    holder = redlease.Lock(async_client, "once")
    assert await holder.acquire()
    other = redlease.Lock(async_client, "once")
    assert await AsyncTasks.run(lambda: other.acquire(blocking=False)) is False
    assert await AsyncTasks.run(lambda: other.acquire(timeout=0)) is False
    assert await AsyncTasks.run(lambda: other.acquire(timeout=0.05)) is False
    # a try that gave up leaves nothing queued
    assert await async_client.zcard(keys("once").queue) == 0
    await holder.release()
    assert await other.acquire(blocking=False)
    await other.release()


async def test_release_twice_and_extend_unheld_raise_not_owned(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = redlease.Lock(async_client, "twice")
    with pytest.raises(redlease.LockNotOwned, match="does not hold"):
        await lock.release()
    with pytest.raises(redlease.LockNotOwned, match="does not hold"):
        await lock.extend()
    await lock.acquire()
    await lock.release()
    with pytest.raises(redlease.LockNotOwned) as info:
        await lock.release()
    assert not isinstance(info.value, redlease.LockLost)


async def test_who_may_release_a_held_lock(async_client: redis.asyncio.Redis) -> None:
    """Threads: only the thread that acquired; another sees no fence and owned() False.
    asyncio: any task of the loop, as with ``asyncio.Lock`` (docs/safety.md)."""
    lock = redlease.Lock(async_client, "mine")
    await lock.acquire()
    fence = lock.fence
    assert fence is not None and await lock.owned()  # the acquirer sees it held

    async def seen() -> tuple[int | None, bool]:
        return lock.fence, await lock.owned()

    if AsyncTasks.ASYNC:
        assert await AsyncTasks.run(seen) == (fence, True)
        await AsyncTasks.run(lock.release)
        assert await async_client.exists(keys("mine").lock) == 0
        return
    assert await AsyncTasks.run(seen) == (None, False)
    with pytest.raises(redlease.LockNotOwned, match="held by another thread"):
        await AsyncTasks.run(lock.release)
    assert await lock.owned()
    await lock.release()


async def test_shared_handle_queues_locally_one_token_each(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = redlease.Lock(async_client, "shared", ttl=5.0)
    seen: list[int] = []
    inside = 0

    async def worker() -> None:
        nonlocal inside
        for _ in range(10):
            async with lock:
                inside += 1
                assert inside == 1
                seen.append(lock.fence or 0)
                await AsyncTasks.sleep(0)
                inside -= 1

    await AsyncTasks.gather(worker, worker, worker)
    assert seen == sorted(seen) and len(set(seen)) == 30


async def test_the_holder_trying_again_is_contention_like_threading_lock(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = redlease.Lock(async_client, "self")
    other = redlease.Lock(async_client, "self")
    await lock.acquire()
    # threading.Lock: a non-blocking or timed acquire by the holder is contention: False.
    for handle in (lock, other):
        assert await handle.acquire(blocking=False) is False
        assert await handle.acquire(timeout=0) is False
        assert await handle.acquire(timeout=0.1) is False
    assert await async_client.zcard(keys("self").queue) == 0  # nothing left queued
    # Only a wait that could never end raises: the holder renews its lease.
    for handle in (lock, other):
        with pytest.raises(RuntimeError, match=r"wait forever.*RLock"):
            await handle.acquire()
        with pytest.raises(RuntimeError, match="wait forever"):
            await handle.acquire(timeout=None)
    assert await lock.owned()
    await lock.release()
    assert await other.acquire(blocking=False)
    await other.release()


async def test_a_lease_that_ran_out_is_not_held_by_its_thread_any_more(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = redlease.Lock(async_client, "lapsed", ttl=0.2, renew=False)
    assert await lock.acquire()
    first = lock.fence
    other = redlease.Lock(async_client, "lapsed", ttl=0.2, renew=False)
    # Not renewed: a wait without a timeout can end (when the lease does), so it waits.
    assert await other.acquire(timeout=None)
    await other.release()
    await AsyncTasks.sleep(0.3)
    assert await lock.acquire(blocking=False)  # the same handle, the same owner: free again
    assert lock.fence is not None and first is not None and lock.fence > first
    await lock.release()


async def test_extend_sets_the_remaining_lease(async_client: redis.asyncio.Redis) -> None:
    lock = redlease.Lock(async_client, "extend", ttl=2.0, renew=False)
    await lock.acquire()
    await lock.extend(30.0)
    remaining = await lock.remaining()
    assert remaining is not None and 2.0 < remaining <= 30.0
    await lock.extend(1.0)  # sets, does not add
    remaining = await lock.remaining()
    assert remaining is not None and remaining <= 1.0
    await lock.extend()
    remaining = await lock.remaining()
    assert remaining is not None and 1.0 < remaining <= 2.0
    await lock.release()


# -- reentrancy -----------------------------------------------------------------------------
async def test_rlock_reenters_and_releases_at_zero(async_client: redis.asyncio.Redis) -> None:
    lock = redlease.RLock(async_client, "re")
    async with lock:
        fence = lock.fence
        async with lock:
            async with redlease.RLock(async_client, "re") as other:  # another object, same name
                assert other.fence == fence
            assert await lock.locked()
        assert await lock.owned()
    assert not await lock.locked()
    with pytest.raises(redlease.LockNotOwned):
        await lock.release()


async def test_rlock_excludes_other_owners(async_client: redis.asyncio.Redis) -> None:
    lock = redlease.RLock(async_client, "re2")
    await lock.acquire()
    other = redlease.RLock(async_client, "re2")
    assert await AsyncTasks.run(lambda: other.acquire(timeout=0.05)) is False
    await lock.release()


async def test_rlock_reentry_after_loss_raises_lost(async_client: redis.asyncio.Redis) -> None:
    lock = redlease.RLock(async_client, "re3", renew=False)
    await lock.acquire()
    await async_client.delete(keys("re3").lock)  # the lease "ran out"
    with pytest.raises(redlease.LockLost):
        await lock.acquire()
    with pytest.raises(redlease.LockLost):
        await lock.release()


@pytest.mark.parametrize("found_by", ["watchdog", "lease end"])
async def test_rlock_reentry_after_a_loss_found_earlier_raises_lost(
    async_client: redis.asyncio.Redis, found_by: str
) -> None:
    """Found lost before the re-entry (by the watchdog, or a lease with no watchdog that ran
    out), re-entry says so too, instead of starting a new acquisition under the old count;
    the twin is the re-entry above, which finds the loss itself."""
    renew = found_by == "watchdog"
    told: list[bool] = []
    lock = redlease.RLock(
        async_client, "re4-" + found_by, ttl=0.3, renew=renew, on_lost=lambda: told.append(True)
    )
    assert await lock.acquire()
    await async_client.delete(keys("re4-" + found_by).lock)

    async def noticed() -> bool:
        return bool(told)

    if renew:
        assert await wait_until(noticed, limit=5.0)  # the watchdog found it
    else:
        await AsyncTasks.sleep(0.4)  # past the lease: it ran out
    with pytest.raises(redlease.LockLost):
        await lock.acquire(timeout=0.2)
    with pytest.raises(redlease.LockLost):
        await lock.release()
    assert await lock.acquire(timeout=1.0)  # free again once released
    await lock.release()


async def test_rlock_reentry_after_a_loss_raises_lost_once_another_holds_it(
    async_client: redis.asyncio.Redis,
) -> None:
    """The lost lease is no longer the client's current holding of the name (another task or
    thread took the lock since): re-entry still says it was lost."""
    told: list[bool] = []
    lock = redlease.RLock(async_client, "re5", ttl=0.3, on_lost=lambda: told.append(True))
    assert await lock.acquire()
    await async_client.delete(keys("re5").lock)

    async def noticed() -> bool:
        return bool(told)

    assert await wait_until(noticed, limit=5.0)
    other = redlease.RLock(async_client, "re5", ttl=1.0, renew=False)  # (left to run out)
    assert await AsyncTasks.run(lambda: other.acquire(timeout=2.0))
    with pytest.raises(redlease.LockLost):
        await lock.acquire(timeout=0.2)
    with pytest.raises(redlease.LockLost):
        await lock.release()


async def test_a_client_that_decodes_responses_works(server: RedisServer) -> None:
    """Many applications set decode_responses=True: replies and messages arrive as str."""
    client = redis.asyncio.Redis(host=server.host, port=server.port, decode_responses=True)
    seen: list[int] = []

    def worker(i: int) -> Any:
        async def run() -> None:
            lock = redlease.Lock(client, "decoded", ttl=5.0)
            for _ in range(10):
                async with lock:
                    seen.append(lock.fence or 0)
            assert await lock.remaining() is None

        return run

    await AsyncTasks.gather(*(worker(i) for i in range(3)))  # contended: hub messages too
    assert sorted(seen) == seen and len(set(seen)) == 30
    await client.aclose()


@pytest.mark.parametrize("fair", [True, False])
async def test_a_handle_takes_its_own_lock_again_once_its_lease_ran_out(
    async_client: redis.asyncio.Redis, fair: bool
) -> None:
    """A lease not renewed runs out: the same handle, asked again while it still held it,
    gets the lock as soon as it is free (as another handle, and redis-py's Lock, do), not
    after its whole timeout."""
    lock = redlease.Lock(async_client, f"self-expired-{fair}", ttl=1.0, renew=False, fair=fair)
    assert await lock.acquire()
    began = time.monotonic()
    assert await lock.acquire(timeout=6.0)
    assert time.monotonic() - began < 4.0  # the lease's 1 s, with room for a loaded machine
    assert lock.fence is not None
    await lock.release()


async def test_twin_a_handle_whose_lease_is_renewed_waits_its_whole_timeout(
    async_client: redis.asyncio.Redis,
) -> None:
    """The check above can fail: a lease the watchdog renews never runs out, so the holder
    asking again waits for the whole timeout, and gets False."""
    lock = redlease.Lock(async_client, "self-renewed", ttl=1.0)
    assert await lock.acquire()
    began = time.monotonic()
    assert await lock.acquire(timeout=2.0) is False
    assert time.monotonic() - began >= 1.9
    await lock.release()
