"""Weighted permits: ``acquire(permits=n)`` and ``with sem(permits=n)`` against a real server
(asyncio; tests/_sync/test_semaphore_weighted.py is generated)."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from tests._async.helpers import wait_until
from tests._async.test_semaphore import _queued
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)


async def test_weighted_permits_are_one_lease(async_client: redis.asyncio.Redis) -> None:
    sem = redlease.Semaphore(async_client, "w-basic", 5, timeout=0.1)
    assert await sem.acquire(permits=3)
    info = await sem.inspect()
    assert (info.used, info.available, info.mine, info.units) == (3, 2, 3, (3,))
    assert len(info.holders) == 1 and len(info.held_by) == 1
    assert not await sem.acquire(permits=3, blocking=False)  # 2 free: all or nothing
    async with sem(permits=2):
        # (holders by lease end: two taken in one millisecond may come in either order)
        assert sorted((await sem.inspect()).units) == [2, 3]
        with pytest.raises(redlease.NoPermit, match="not 4 permits"):
            async with sem(permits=4):
                pass  # pragma: no cover
    await sem.release()  # the 3 at once
    assert await sem.available() == 5
    assert (await sem.inspect()).mine == 0


async def test_bad_weights_are_refused_naming_the_argument(
    async_client: redis.asyncio.Redis,
) -> None:
    sem = redlease.Semaphore(async_client, "w-bad", 5)
    for bad, error in ((0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError)):
        with pytest.raises(error, match="permits"):
            await sem.acquire(permits=bad)
        with pytest.raises(error, match="permits"):
            sem(permits=bad)
    with pytest.raises(ValueError, match="at most the 5 permits"):
        await sem.acquire(permits=6)
    assert await sem.available() == 5  # nothing was sent


async def test_a_crashed_weighted_holder_gives_its_permits_back(
    async_client: redis.asyncio.Redis,
) -> None:
    crashed = redlease.Semaphore(async_client, "w-crash", 5, ttl=0.5, renew=False)
    assert await crashed.acquire(permits=4)  # never released: its lease runs out
    other = redlease.Semaphore(async_client, "w-crash", 5)
    assert await other.acquire(permits=5, timeout=20)
    await other.release()


async def test_a_large_waiter_at_the_head_blocks_later_small_ones(
    async_client: redis.asyncio.Redis,
) -> None:
    """Strict FIFO: 3 free, a waiter for 5 first in line, then one for 1: the 1 waits too."""
    sem = redlease.Semaphore(async_client, "w-fifo", 5, ttl=30.0)
    order: list[int] = []

    def waiter(weight: int, ahead: int) -> Any:
        async def run() -> None:
            assert await wait_until(lambda: _used(sem, 2))
            assert await wait_until(lambda: _queued(async_client, "w-fifo", ahead))
            mine = redlease.Semaphore(async_client, "w-fifo", 5, timeout=20)
            async with mine(permits=weight):
                order.append(weight)

        return run

    async def hold() -> None:
        assert await sem.acquire(permits=2)
        assert await wait_until(lambda: _queued(async_client, "w-fifo", 2))
        await AsyncTasks.sleep(0.3)  # the small one could have gone in: 1 + 2 <= 5
        assert order == []
        await sem.release()

    await AsyncTasks.gather(hold, waiter(5, 0), waiter(1, 1))
    assert order == [5, 1]


async def _used(sem: redlease.Semaphore, n: int) -> bool:
    return (await sem.inspect()).used >= n


async def _load(client: redis.asyncio.Redis, name: str, *, honest: bool) -> tuple[int, int]:
    """16 workers, random weights 1-5, on a semaphore of 5 permits: the most in use at once
    (counted by the workers under a local lock) and the most grants a weight-5 waiter saw go
    by before its own. ``honest=False`` is the broken twin: every acquisition asks for 1."""
    guard = threading.Lock()
    state = {"in_use": 0, "peak": 0, "grants": 0, "bypass": 0}

    def worker(seed: int) -> Any:
        async def run() -> None:
            rng = random.Random(seed)
            sem = redlease.Semaphore(client, name, 5, ttl=10.0, timeout=30)
            for _ in range(3):
                weight = rng.randint(1, 5)
                ticket = state["grants"]
                assert await sem.acquire(permits=weight if honest else 1)
                with guard:
                    if weight == 5:
                        state["bypass"] = max(state["bypass"], state["grants"] - ticket)
                    state["grants"] += 1
                    state["in_use"] += weight
                    state["peak"] = max(state["peak"], state["in_use"])
                await AsyncTasks.sleep(0.01)
                with guard:
                    state["in_use"] -= weight
                await sem.release()

        return run

    await AsyncTasks.gather(*(worker(seed) for seed in range(16)))
    assert state["grants"] == 48
    return state["peak"], state["bypass"]


async def test_weighted_load_never_overruns_and_serves_large_waiters(
    async_client: redis.asyncio.Redis,
) -> None:
    peak, bypass = await _load(async_client, "w-load", honest=True)
    assert 1 <= peak <= 5
    # Strict FIFO: at most the 15 other workers' grants (once each) go by before a waiter's
    # own; generous slack for those already granted when it asked.
    assert bypass <= 32


async def test_twin_counting_every_acquisition_as_one_overruns(
    async_client: redis.asyncio.Redis,
) -> None:
    peak, _ = await _load(async_client, "w-twin", honest=False)
    assert peak > 5  # the check above would catch an accounting that ignores weights
