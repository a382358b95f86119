"""Semaphore against a real server (asyncio; tests/_sync/test_semaphore.py is generated)."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._core.semaphore import semaphore_keys
from redlease._core.shared import SharedKeys
from tests._async.helpers import wait_until
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)


def keys(name: str) -> SharedKeys:
    return semaphore_keys("redlease", name.encode())


async def test_permits_are_counted_and_given_back(async_client: redis.asyncio.Redis) -> None:
    sem = redlease.Semaphore(async_client, "api", 2, ttl=10.0)
    assert await sem.available() == 2
    assert await sem.acquire()
    first = sem.fence
    assert await sem.acquire()
    assert first is not None and (sem.fence or 0) > first
    assert await sem.available() == 0
    assert not await sem.acquire(blocking=False)
    assert not await sem.acquire(timeout=0.2)
    info = await sem.inspect()
    assert (info.permits, info.used, info.available, info.mine) == (2, 2, 0, 2)
    assert len(info.holders) == 2 and all(0 < left <= 10.0 for left in info.holders)
    assert await sem.owned()
    await sem.release()
    await sem.release()
    assert await sem.available() == 2
    assert not await sem.owned()
    with pytest.raises(redlease.PermitNotHeld):
        await sem.release()


async def test_context_manager_and_no_permit(async_client: redis.asyncio.Redis) -> None:
    sem = redlease.Semaphore(async_client, "ctx", 1, timeout=0.1)
    async with sem:
        assert await sem.available() == 0

        async def other() -> None:
            with pytest.raises(redlease.NoPermit, match="'ctx'"):
                async with redlease.Semaphore(async_client, "ctx", 1, timeout=0.1):
                    pass  # pragma: no cover

        await AsyncTasks.run(other)
    assert await sem.available() == 1


async def test_a_permit_belongs_to_its_owner(async_client: redis.asyncio.Redis) -> None:
    """Threads: to the thread that took it. asyncio: to the handle (any task of its loop)."""
    sem = redlease.Semaphore(async_client, "owner", 3)
    assert await sem.acquire()
    fence = sem.fence
    assert fence is not None

    async def other() -> None:
        if AsyncTasks.ASYNC:
            assert sem.fence == fence and await sem.owned()
            await sem.release()
            return
        assert sem.fence is None and not await sem.owned()
        with pytest.raises(redlease.PermitNotHeld, match="this thread holds nothing"):
            await sem.release()

    await AsyncTasks.run(other)
    if not AsyncTasks.ASYNC:
        await sem.release()
    assert await sem.available() == 3


async def test_a_waiter_is_woken_by_a_release(async_client: redis.asyncio.Redis) -> None:
    sem = redlease.Semaphore(async_client, "wake", 1, ttl=30.0)

    async def wait() -> bool:
        assert await wait_until(lambda: _full(sem))
        other = redlease.Semaphore(async_client, "wake", 1)
        got = await other.acquire(timeout=20)  # far below the 30 s lease: woken, not expired
        await other.release()
        return got

    async def release_soon() -> None:
        assert await sem.acquire()
        assert await wait_until(lambda: _queued(async_client, "wake", 1))
        await sem.release()

    assert (await AsyncTasks.gather(wait, release_soon))[0] is True


async def test_freed_permits_wake_several_waiters_at_once(
    async_client: redis.asyncio.Redis,
) -> None:
    sem = redlease.Semaphore(async_client, "many", 3, ttl=30.0)
    inside: list[int] = []

    def waiter(i: int) -> Any:
        async def run() -> None:
            assert await wait_until(lambda: _full(sem))
            mine = redlease.Semaphore(async_client, "many", 3)
            assert await mine.acquire(timeout=20)
            inside.append(i)
            assert await wait_until(lambda: _inside(inside, 3))  # all three at once
            await mine.release()

        return run

    async def free_all() -> None:
        for _ in range(3):
            assert await sem.acquire()
        assert await wait_until(lambda: _queued(async_client, "many", 3))
        for _ in range(3):
            await sem.release()

    await AsyncTasks.gather(free_all, *(waiter(i) for i in range(3)))
    assert sorted(inside) == [0, 1, 2]


async def test_waiters_are_served_in_queue_order(async_client: redis.asyncio.Redis) -> None:
    sem = redlease.Semaphore(async_client, "fifo", 1, ttl=30.0)
    order: list[int] = []

    def waiter(i: int) -> Any:
        async def run() -> None:
            assert await wait_until(lambda: _full(sem))
            assert await wait_until(lambda: _queued(async_client, "fifo", i))
            mine = redlease.Semaphore(async_client, "fifo", 1)
            async with mine:
                order.append(i)

        return run

    async def release_last() -> None:
        assert await sem.acquire()
        assert await wait_until(lambda: _queued(async_client, "fifo", 4))
        await sem.release()

    await AsyncTasks.gather(release_last, *(waiter(i) for i in range(4)))
    assert order == [0, 1, 2, 3]


async def test_set_permits_applies_to_next_acquisitions_only(
    async_client: redis.asyncio.Redis,
) -> None:
    sem = redlease.Semaphore(async_client, "resize", 2)
    assert await sem.acquire() and await sem.acquire()
    assert await sem.set_permits(1) == 2
    info = await sem.inspect()
    assert (info.permits, info.used, info.available) == (1, 2, 0)  # nothing revoked
    await sem.release()
    assert not await sem.acquire(timeout=0)  # still 1 held of 1
    await sem.release()
    late = redlease.Semaphore(async_client, "resize", 5)  # the stored count wins
    assert (await late.inspect()).permits == 1
    assert await late.set_permits(3) == 1
    assert await sem.acquire() and await sem.acquire() and await sem.acquire()
    assert not await sem.acquire(timeout=0)
    for _ in range(3):
        await sem.release()


def mismatches(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "redlease_event", "") == "permits_mismatch"]


async def test_a_handle_asking_other_permits_than_stored_is_told_once(
    async_client: redis.asyncio.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis keeps the count stored first (5): a handle asking for 3 uses 5, and says so once,
    from its first acquisition's reply (no extra round trip)."""
    caplog.set_level(logging.WARNING, logger="redlease")
    first = redlease.Semaphore(async_client, "pool", 5)
    async with first:
        pass
    late = redlease.Semaphore(async_client, "pool", 3)
    for _ in range(4):  # 4 held: more than the 3 it asked for, within the 5 stored
        assert await late.acquire(blocking=False)
    [record] = mismatches(caplog)  # one per handle, not one per acquisition
    assert record.levelno == logging.WARNING and "3" in record.getMessage()
    assert (record.redlease_permits, record.redlease_stored) == (3, 5)  # type: ignore[attr-defined]
    for _ in range(4):
        await late.release()
    again = redlease.Semaphore(async_client, "pool", 3)  # another handle: told again
    assert await again.acquire(blocking=False)
    await again.release()
    assert len(mismatches(caplog)) == 2


async def test_twin_matching_permits_log_nothing(
    async_client: redis.asyncio.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """The twin: the same handles with the stored count (or after set_permits) stay quiet."""
    caplog.set_level(logging.WARNING, logger="redlease")
    first = redlease.Semaphore(async_client, "pool", 5)
    async with first:
        pass
    same = redlease.Semaphore(async_client, "pool", 5)
    for _ in range(2):
        assert await same.acquire(blocking=False)
        await same.release()
    assert await same.set_permits(3) == 5
    assert await same.acquire(blocking=False)  # now 3 stored, 3 asked
    await same.release()
    assert mismatches(caplog) == []


async def test_set_permits_wakes_waiters_that_now_fit(async_client: redis.asyncio.Redis) -> None:
    sem = redlease.Semaphore(async_client, "grow", 1, ttl=30.0)

    async def wait() -> bool:
        assert await wait_until(lambda: _full(sem))
        other = redlease.Semaphore(async_client, "grow", 1)
        got = await other.acquire(timeout=20)
        await other.release()
        return got

    async def grow() -> None:
        assert await sem.acquire()
        assert await wait_until(lambda: _queued(async_client, "grow", 1))
        await sem.set_permits(2)
        await sem.release()

    assert (await AsyncTasks.gather(wait, grow))[0] is True


async def test_an_expired_permit_comes_back_and_its_holder_is_told(
    async_client: redis.asyncio.Redis,
) -> None:
    lost: list[str] = []
    crashed = redlease.Semaphore(async_client, "crash", 1, ttl=0.3, renew=False)
    assert await crashed.acquire()
    waiter = redlease.Semaphore(async_client, "crash", 1)

    async def wait() -> bool:
        got = await waiter.acquire(timeout=10)
        await waiter.release()
        return got

    assert await AsyncTasks.run(wait)
    with pytest.raises(redlease.PermitLost):
        await crashed.release()
    # A renewed permit whose entry disappears is reported lost by the watchdog.
    sem = redlease.Semaphore(async_client, "gone", 1, ttl=0.3, on_lost=lambda: lost.append("x"))
    assert await sem.acquire()
    await async_client.delete(keys("gone").holders)
    assert await wait_until(lambda: _truthy(lost))
    with pytest.raises(redlease.PermitLost):
        await sem.release()


async def test_the_watchdog_keeps_permits_through_slow_work(
    async_client: redis.asyncio.Redis,
) -> None:
    sem = redlease.Semaphore(async_client, "slow", 1, ttl=1.0)  # (0.3 s lapsed under load)
    assert await sem.acquire()
    await AsyncTasks.sleep(2.5)  # longer than the lease: owned only if renewed
    assert await sem.owned()
    await sem.release()


async def test_a_dead_reserved_waiter_is_skipped(async_client: redis.asyncio.Redis) -> None:
    sem = redlease.Semaphore(async_client, "dead", 1, handoff=0.05)

    async def wait() -> bool:
        assert await wait_until(lambda: _full(sem))
        await async_client.zadd(keys("dead").queue, {b"crashed.waiter": 0})
        other = redlease.Semaphore(async_client, "dead", 1)
        got = await other.acquire(timeout=10)
        await other.release()
        return got

    async def release_soon() -> None:
        assert await sem.acquire()
        assert await wait_until(lambda: _queued(async_client, "dead", 2))
        await sem.release()

    assert (await AsyncTasks.gather(wait, release_soon))[0] is True
    assert await async_client.zcard(keys("dead").queue) == 0


async def test_a_blocked_waiter_sends_no_commands(async_quiet_client: redis.asyncio.Redis) -> None:
    sem = redlease.Semaphore(async_quiet_client, "idle", 1, ttl=10)
    assert await sem.acquire()
    counted: list[int] = []

    async def wait() -> bool:
        return await redlease.Semaphore(async_quiet_client, "idle", 1).acquire(timeout=1.5)

    async def count() -> None:
        await AsyncTasks.sleep(0.4)
        before = await _processed(async_quiet_client)
        await AsyncTasks.sleep(1.0)
        counted.append(await _processed(async_quiet_client) - before - 1)

    results = await AsyncTasks.gather(wait, count)
    assert results[0] is False
    assert counted == [0]
    await sem.release()


@pytest.mark.parametrize(
    ("permits", "error", "message"),
    [(0, ValueError, "permits must be >= 1"), ("2", TypeError, "permits must be an int")],
)
async def test_bad_permits(
    async_client: redis.asyncio.Redis, permits: Any, error: Any, message: str
) -> None:
    with pytest.raises(error, match=message):
        redlease.Semaphore(async_client, "bad", permits)
    with pytest.raises(TypeError, match="permits must be an int"):
        await redlease.Semaphore(async_client, "bad", 1).set_permits(1.5)  # type: ignore[arg-type]


async def test_outage_raises_unavailable(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=0.5)
    sem = redlease.Semaphore(client, "down", 1)
    srv.stop()
    with pytest.raises(redlease.SemaphoreUnavailable) as info:
        await sem.acquire()
    assert isinstance(info.value, redlease.Unavailable)
    assert info.value.__cause__ is not None
    await client.aclose()


async def _queued(client: redis.asyncio.Redis, name: str, n: int) -> bool:
    return int(await client.zcard(keys(name).queue)) >= n


async def _full(sem: redlease.Semaphore) -> bool:
    return await sem.available() == 0


async def _inside(inside: list[int], n: int) -> bool:
    return len(inside) >= n


async def _truthy(value: list[str]) -> bool:
    return bool(value)


async def _processed(client: redis.asyncio.Redis) -> int:
    return int((await client.info("stats"))["total_commands_processed"])


async def test_lowering_permits_withdraws_reservations_that_no_longer_fit(
    async_client: redis.asyncio.Redis,
) -> None:
    sem = redlease.Semaphore(async_client, "shrink", 2)
    assert await sem.acquire()
    k = keys("shrink")
    await async_client.zadd(k.queue, {b"dead.waiter": 0})
    await async_client.zadd(k.granted, {b"dead.waiter": 2**40})  # reserved, far in the future
    await sem.set_permits(1)  # 1 held of 1: the reservation no longer fits
    assert await async_client.zcard(k.granted) == 0
    await sem.release()


async def test_only_the_first_waiter_that_does_not_fit_checks_on_reservations(
    async_client: redis.asyncio.Redis,
) -> None:
    """The others sleep until woken (or a lease ends): no look after every hand-off."""
    from redlease._core import shared
    from redlease._core.waiters import WAITERS

    k = keys("checker")
    await async_client.zadd(k.holders, {b"holder.1": 2**45})  # 2 permits: 1 held ...
    await async_client.zadd(k.queue, {b"p.w1": 1, b"p.w2": 2, b"p.w3": 3})
    await async_client.zadd(k.granted, {b"p.w1": 2**45})  # ... and 1 reserved for w1

    async def attempt(token: bytes) -> list[int]:
        args = [token, 10000, 1, 1, 50, WAITERS, 2, 0, b""]
        raw = await async_client.eval(shared.ACQUIRE.source, 8, *k.in_order(), *args)
        return [int(x) for x in raw]

    assert (await attempt(b"p.w2"))[0] == 2  # first that does not fit: checks on w1
    assert (await attempt(b"p.w3"))[0] == 0  # told the lease end only
    assert (await attempt(b"p.new"))[0] == 0  # a newcomer queues behind, told the lease end
