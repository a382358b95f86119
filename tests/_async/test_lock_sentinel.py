"""Locks through ``Sentinel(...).master_for()`` clients, before and after a failover.

The Sentinel fixture (master + 2 replicas + 3 sentinels, ``tests.topology``) heals itself
before each test. The backend builds its private pool from the client's own (a Sentinel pool:
it asks the sentinels for the master), so scripts and the waiters' subscription follow the
master after a failover.
"""

from __future__ import annotations

import contextlib
import time

import pytest

import redlease.asyncio as redlease
from tests._async.helpers import wait_until
from tests._async.lock_helpers import hold_until, keys
from tests._async.test_logging import events
from tests.support import AsyncTasks
from tests.topology import SentinelGroup

pytestmark = pytest.mark.timeout(120)


async def test_lock_wait_and_hand_off_on_a_sentinel_master(sentinel_group: SentinelGroup) -> None:
    client = sentinel_group.async_master_for()
    holder = redlease.Lock(client, "s", ttl=10)
    waiter = redlease.Lock(client, "s", ttl=10)
    got: list[float] = []

    async def wait() -> None:
        assert await wait_until(holder.locked)
        assert await waiter.acquire(timeout=20)
        got.append(time.monotonic())
        await waiter.release()

    async def queued() -> bool:
        return int(await client.zcard(keys("s").queue)) == 1

    await AsyncTasks.gather(hold_until(holder, queued), wait)
    assert len(got) == 1
    await client.aclose()


async def test_after_a_failover_scripts_and_wake_ups_follow_the_new_master(
    sentinel_group: SentinelGroup, topology_timings: list[str]
) -> None:
    """A lock taken before the failover; after it, a waiter subscribes on the new master and
    is woken by the release there (the lease is long: no timer would wake it in time)."""
    client = sentinel_group.async_master_for()
    first = redlease.Lock(client, "before", ttl=10)
    assert await first.acquire()  # the runtime, its pool and its hub exist before the failover
    await first.release()
    _, new, seconds = await AsyncTasks.blocking(sentinel_group.failover)
    topology_timings.append(f"sentinel failover under a lock client: {seconds:.2f}s")

    holder = redlease.Lock(client, "after", ttl=10)
    waiter = redlease.Lock(client, "after", ttl=10)
    woken: list[float] = []
    released: list[float] = []

    fences: list[int] = []

    async def hold() -> None:
        assert await holder.acquire(timeout=10)
        fences.append(holder.fence or 0)
        assert await wait_until(_queued(client, "after"))
        released.append(time.monotonic())
        await holder.release()

    async def wait() -> None:
        assert await wait_until(holder.locked)
        assert await waiter.acquire(timeout=30)
        woken.append(time.monotonic())
        fences.append(waiter.fence or 0)
        await waiter.release()

    await AsyncTasks.gather(hold, wait)
    assert woken[0] - released[0] < 5.0
    with new.client() as conn:
        # it all happened on the new master: the last fence is there, after the first
        assert int(conn.get(keys("after").fence) or 0) == fences[1] > fences[0] > 0
    await client.aclose()


async def test_a_lease_held_through_a_failover_is_renewed_on_the_new_master(
    sentinel_group: SentinelGroup, topology_timings: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 9, on Sentinel: the master dies just before a renewal. Renewals fail until the
    sentinels promote a replica, are retried (every 0.5 s), and the first after the promotion
    renews the lease on the new master: the holder keeps it and is not told otherwise."""
    client = sentinel_group.async_master_for(socket_timeout=2)
    lost: list[int] = []
    ttl = 9.0  # renewed every 3 s; a failover of several seconds fits in the lease
    holder = redlease.Lock(
        client, "renewed-through", ttl=ttl, wait_replicas=2, on_lost=lambda: lost.append(1)
    )
    acquired = time.monotonic()
    assert await holder.acquire()  # both replicas have it: the promoted one too
    await AsyncTasks.sleep(max(0.0, acquired + ttl / 3 - 0.3 - time.monotonic()))
    _, new, seconds = await AsyncTasks.blocking(sentinel_group.failover)  # the renewal: now
    topology_timings.append(f"sentinel failover under a held lock: {seconds:.2f}s")

    async def renewed_there() -> bool:  # a renewal reached the new master
        with new.client() as conn:
            return int(conn.pttl(keys("renewed-through").lock)) > (ttl - 1.5) * 1000

    assert await wait_until(renewed_there, limit=ttl)
    failed = events(caplog, "renewal_failed")
    tries = sum(1 for r in failed if "renewed-through" in getattr(r, "redlease_names", ()))
    print(f"renewal tries during a Sentinel failover of {seconds:.2f}s: {tries}")
    assert tries <= 4 + 3 * seconds  # one per 0.5 s at most, with slack (not a busy loop)
    assert not lost and await holder.owned()
    await holder.release()
    await redlease.close(client)
    await client.aclose()


def _queued(client: object, name: str) -> object:
    async def check() -> bool:
        return int(await client.zcard(keys(name).queue)) == 1  # type: ignore[attr-defined]

    return check


async def test_a_waiter_blocked_through_a_failover_is_told_not_left_hanging(
    sentinel_group: SentinelGroup,
) -> None:
    """The master dies under a blocked waiter: its subscription breaks, it tries again, and
    either gets the lock on the new master or raises LockUnavailable; never False, never a
    hang until its timeout."""
    client = sentinel_group.async_master_for(socket_timeout=2)
    holder = redlease.Lock(client, "through", ttl=10)
    waiter = redlease.Lock(client, "through", ttl=10)
    outcome: list[object] = []

    async def hold() -> None:
        assert await holder.acquire()
        assert await wait_until(_queued(client, "through"))
        await AsyncTasks.blocking(sentinel_group.failover)
        # Kept through the failover, or lost: either way, not left to the watchdog.
        with contextlib.suppress(redlease.LockError):
            await holder.release()

    async def wait() -> None:
        assert await wait_until(holder.locked)
        began = time.monotonic()
        try:
            outcome.append(await waiter.acquire(timeout=60))
        except redlease.LockUnavailable as exc:
            outcome.append(repr(exc))  # not the exception: its traceback would keep holder
        outcome.append(time.monotonic() - began)

    await AsyncTasks.gather(hold, wait)
    result, seconds = outcome
    print(f"a waiter blocked through a failover: {result} after {seconds:.2f}s")
    assert result is not False
    assert isinstance(seconds, float) and seconds < 30  # far from its 60 s timeout
    fresh = redlease.Lock(client, "after-failover", ttl=10)
    assert await fresh.acquire(timeout=10)  # and the new master serves locks
    await fresh.release()
    await redlease.close(client)  # the holder (or the waiter) still holds "through"
    await client.aclose()


async def test_the_logs_name_a_sentinel_master_by_its_service(
    sentinel_group: SentinelGroup,
) -> None:
    """A Sentinel client's pool has no host or port of its own (it was 'localhost:None/0')."""
    from redlease._async.runtime import runtime_for

    client = sentinel_group.async_master_for()
    assert not await redlease.Lock(client, "named").locked()
    address = runtime_for(client).backend.address
    assert sentinel_group.service in address and "None" not in address, address
    await client.aclose()
