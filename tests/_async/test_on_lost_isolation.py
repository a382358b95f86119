"""A slow or failing ``on_lost`` costs the other leases nothing (issue 23, item 2).

The sync ``on_lost`` ran on the watchdog's thread: one that slept 3 s stopped every renewal
of the client, and three other locks with ``ttl=1`` were lost. Callbacks now run off the
watchdog's path (sync: a thread per callback, a few at most, so that one that blocks delays
no other lock's; asyncio: in a later turn of the loop, a coroutine as a task of its own).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._core.lock import LockKeys
from redlease._synchronization import AsyncBackground, AsyncCallbacks
from tests._async.helpers import wait_until
from tests._async.test_logging import events
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)

BLOCK = 3.0  # seconds the slow on_lost takes: three renewal periods of a 1 s lease, and more


def lock_key(name: str) -> bytes:
    return LockKeys.build("redlease", name.encode()).lock


async def others_survive(client: Any, prefix: str) -> tuple[list[str], list[bool]]:
    """One lock's ``on_lost`` blocks for BLOCK seconds while three other ``ttl=1`` locks of
    the same client are held; returns who ran the callback, and whether each of the three
    could still be released (kept its lease) after it."""
    ran_by: list[str] = []

    async def slow_on_lost() -> None:
        ran_by.append(AsyncTasks.current())
        await AsyncTasks.sleep(BLOCK)

    doomed = redlease.Lock(client, f"{prefix}:doomed", ttl=1.0, on_lost=slow_on_lost)
    others = [redlease.Lock(client, f"{prefix}:other{i}", ttl=1.0) for i in range(3)]
    assert await doomed.acquire()
    for lock in others:
        assert await lock.acquire()
    await client.delete(lock_key(f"{prefix}:doomed"))  # taken away: the next renewal sees it

    async def started() -> bool:
        return bool(ran_by)

    assert await wait_until(started, limit=5)
    await AsyncTasks.sleep(BLOCK + 0.5)  # the callback blocked all along, and returned
    kept: list[bool] = []
    for lock in others:
        try:
            await lock.release()
            kept.append(True)
        except redlease.LockLost:
            kept.append(False)
    return ran_by, kept


async def test_a_blocking_on_lost_costs_the_other_locks_nothing(
    async_client: redis.asyncio.Redis,
) -> None:
    ran_by, kept = await others_survive(async_client, "isolated")
    assert kept == [True, True, True]
    assert ran_by and not ran_by[0].startswith("redlease-renewer")  # not the watchdog
    await redlease.close(async_client)


async def test_twin_run_inline_on_the_watchdog_the_others_are_lost(
    async_client: redis.asyncio.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check above catches a callback run on the watchdog's own path (the old way)."""
    if AsyncTasks.ASYNC:
        pytest.skip("asyncio runs a coroutine callback as a task: inline, it cannot block")
    monkeypatch.setattr(
        AsyncCallbacks, "submit", lambda self, callback: AsyncBackground.call(callback)
    )
    ran_by, kept = await others_survive(async_client, "inline")
    assert ran_by[0].startswith("redlease-renewer")
    assert False in kept  # fails the check above: a lease ran out while the watchdog slept
    await redlease.close(async_client)


async def told_beside_a_slow_one(client: Any, prefix: str) -> tuple[list[float], list[float]]:
    """One lock's ``on_lost`` blocks for BLOCK seconds; while it does, a second lock is lost.
    Returns when the second's ``on_lost`` ran, and when the slow one ended (monotonic)."""
    started: list[float] = []
    ended: list[float] = []
    told: list[float] = []

    async def slow_on_lost() -> None:
        started.append(time.monotonic())
        await AsyncTasks.sleep(BLOCK)
        ended.append(time.monotonic())

    async def on_lost() -> None:
        told.append(time.monotonic())

    slow = redlease.Lock(client, f"{prefix}:slow", ttl=1.0, on_lost=slow_on_lost)
    other = redlease.Lock(client, f"{prefix}:other", ttl=1.0, on_lost=on_lost)
    assert await slow.acquire() and await other.acquire()
    await client.delete(lock_key(f"{prefix}:slow"))

    async def slow_started() -> bool:
        return bool(started)

    assert await wait_until(slow_started, limit=5)
    await client.delete(lock_key(f"{prefix}:other"))  # lost while the slow one blocks

    async def both() -> bool:
        return bool(told and ended)

    assert await wait_until(both, limit=BLOCK + 5)
    return told, ended


async def test_a_blocking_on_lost_delays_no_other_locks_on_lost(
    async_client: redis.asyncio.Redis,
) -> None:
    told, ended = await told_beside_a_slow_one(async_client, "beside")
    assert told[0] < ended[0]  # told while the slow callback still blocked
    await redlease.close(async_client)


async def test_twin_one_callback_at_a_time_tells_the_other_lock_late(
    async_client: redis.asyncio.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check above catches callbacks run one at a time (the old single thread)."""
    if AsyncTasks.ASYNC:
        pytest.skip("asyncio runs each coroutine callback as a task of its own")
    one_thread = AsyncCallbacks.__init__
    monkeypatch.setattr(
        AsyncCallbacks,
        "__init__",
        lambda self: one_thread(self, threads=1),  # type: ignore[call-arg]
    )
    told, ended = await told_beside_a_slow_one(async_client, "serial")
    assert told[0] >= ended[0]
    await redlease.close(async_client)


async def test_a_failing_on_lost_is_logged_and_the_watchdog_goes_on(
    async_client: redis.asyncio.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    def failing() -> None:
        raise RuntimeError("the on_lost of the test failed")

    doomed = redlease.Lock(async_client, "failing:doomed", ttl=0.6, on_lost=failing)
    other = redlease.Lock(async_client, "failing:other", ttl=0.6)
    assert await doomed.acquire()
    assert await other.acquire()
    await async_client.delete(lock_key("failing:doomed"))

    async def logged() -> bool:
        return bool(events(caplog, "on_lost_failed"))

    assert await wait_until(logged, limit=5)
    await AsyncTasks.sleep(1.0)  # more than a lease: renewed meanwhile
    await other.release()
    with pytest.raises(redlease.LockLost):
        await doomed.release()
    await redlease.close(async_client)


async def test_no_callback_thread_or_task_is_left_after_close(
    async_client: redis.asyncio.Redis,
) -> None:
    """A callback still running at close is waited for a bounded time, then left (a thread)
    or cancelled (a task); the callback runner itself ends."""
    told: list[str] = []

    async def slow_on_lost() -> None:
        told.append("called")
        await AsyncTasks.sleep(0.5)

    lock = redlease.Lock(async_client, "closing:doomed", ttl=0.6, on_lost=slow_on_lost)
    assert await lock.acquire()
    await async_client.delete(lock_key("closing:doomed"))

    async def started() -> bool:
        return bool(told)

    assert await wait_until(started, limit=5)
    await redlease.close(async_client)

    async def gone() -> bool:
        return not any(
            name.startswith(("redlease-callbacks", "redlease-renewer"))
            for name in AsyncTasks.names()
        ) and not (AsyncTasks.ASYNC and AsyncTasks.background())

    assert await wait_until(gone, limit=3)


async def test_an_on_lost_that_closes_redlease_does_not_wait_for_itself(
    async_client: redis.asyncio.Redis,
) -> None:
    """close() from inside a callback: the runner does not wait for (or cancel) the callback
    that called it."""
    done: list[float] = []

    async def closing_on_lost() -> None:
        started = time.monotonic()
        await redlease.close(async_client)
        done.append(time.monotonic() - started)

    lock = redlease.Lock(async_client, "closing:itself", ttl=0.6, on_lost=closing_on_lost)
    assert await lock.acquire()
    await async_client.delete(lock_key("closing:itself"))

    async def closed() -> bool:
        return bool(done)

    assert await wait_until(closed, limit=5)
    assert done[0] < 2.0  # not a socket timeout (5 s) spent waiting for itself
