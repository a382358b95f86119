"""CountDownLatch against a real server (asyncio; tests/_sync/test_latch.py is generated)."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._core.latch import LatchKeys
from tests._async.helpers import wait_until
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)


def keys(name: str) -> LatchKeys:
    return LatchKeys.build("redlease", name.encode())


async def test_set_count_down_and_count(async_client: redis.asyncio.Redis) -> None:
    latch = redlease.CountDownLatch(async_client, "start")
    assert await latch.count() == 0
    assert await latch.wait(0)  # not counting: open
    assert await latch.try_set_count(2)
    assert not await latch.try_set_count(5)  # only when not counting
    assert await latch.count() == 2
    assert not await latch.wait(0.1)
    assert await latch.count_down() == 1
    assert await latch.count_down() == 0
    assert await latch.count_down() == 0  # no-op when open
    assert await latch.wait(0)
    assert await latch.inspect() == redlease.LatchInfo("start", count=0, rounds=1, waiters=0)
    assert await latch.try_set_count(1)  # the next round


async def test_every_waiter_is_released_by_the_last_count_down(
    async_client: redis.asyncio.Redis,
) -> None:
    latch = redlease.CountDownLatch(async_client, "crowd")
    assert await latch.try_set_count(3)
    downs: list[int] = []
    seen: list[int] = []

    def waiter() -> Any:
        async def run() -> bool:
            ok = await redlease.CountDownLatch(async_client, "crowd").wait(20)
            seen.append(len(downs))
            return ok

        return run

    async def count_down() -> None:
        assert await wait_until(lambda: _waiting(latch, 5))
        for _ in range(3):
            downs.append(1)
            await latch.count_down()

    results = await AsyncTasks.gather(count_down, *(waiter() for _ in range(5)))
    assert results[1:] == [True] * 5
    assert seen == [3] * 5  # none before the last count-down


async def test_a_waiter_of_a_finished_round_is_released_even_if_a_new_round_began(
    async_client: redis.asyncio.Redis,
) -> None:
    """The message that opened the latch was lost; the next round has begun when it looks."""
    latch = redlease.CountDownLatch(async_client, "rounds")
    assert await latch.try_set_count(1)

    async def wait() -> bool:
        return await latch.wait(20)

    async def round_trip() -> None:
        assert await wait_until(lambda: _waiting(latch, 1))
        await async_client.set(keys("rounds").generation, 1)  # a round ended unheard ...
        await async_client.delete(keys("rounds").waiters)
        # ... and the count is set again; then something wakes the waiter (a reconnect).
        from redlease._async.runtime import runtime_for

        hub = runtime_for(async_client).hub
        for waiter in hub._table.waiters():
            waiter.woken = True
            waiter.event.set()

    results = await AsyncTasks.gather(wait, round_trip)
    assert results[0] is True


async def test_timeout_leaves_the_waiters_set(async_client: redis.asyncio.Redis) -> None:
    latch = redlease.CountDownLatch(async_client, "left")
    assert await latch.try_set_count(1)
    assert not await latch.wait(0.3)
    assert (await latch.inspect()).waiters == 0


async def test_a_blocked_waiter_sends_no_commands(async_quiet_client: redis.asyncio.Redis) -> None:
    latch = redlease.CountDownLatch(async_quiet_client, "idle")
    assert await latch.try_set_count(1)
    counted: list[int] = []

    async def count() -> None:
        await AsyncTasks.sleep(0.4)
        before = await _processed(async_quiet_client)
        await AsyncTasks.sleep(1.0)
        counted.append(await _processed(async_quiet_client) - before - 1)

    results = await AsyncTasks.gather(lambda: latch.wait(1.5), count)
    assert results[0] is False
    assert counted == [0]


async def test_bad_arguments_and_foreign_data(async_client: redis.asyncio.Redis) -> None:
    latch = redlease.CountDownLatch(async_client, "bad")
    with pytest.raises(ValueError, match="count must be >= 1"):
        await latch.try_set_count(0)
    with pytest.raises(TypeError, match="count must be an int"):
        await latch.try_set_count("3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout must be >= 0"):
        await latch.wait(-2)
    await async_client.hset(keys("bad").count, "f", "v")
    with pytest.raises(redlease.ForeignData):
        await latch.inspect()


async def test_outage_raises_unavailable(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=0.5)
    latch = redlease.CountDownLatch(client, "down")
    srv.stop()
    with pytest.raises(redlease.LatchUnavailable) as info:
        await latch.wait()
    assert isinstance(info.value, redlease.Unavailable)
    await client.aclose()


async def _waiting(latch: redlease.CountDownLatch, n: int) -> bool:
    return (await latch.inspect()).waiters >= n


async def _processed(client: redis.asyncio.Redis) -> int:
    return int((await client.info("stats"))["total_commands_processed"])
