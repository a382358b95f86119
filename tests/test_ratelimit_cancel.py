"""A cancelled asyncio ``RateLimiter.acquire`` gives its reservation back, when it can."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from tests._async.helpers import wait_until

pytestmark = pytest.mark.timeout(60)
RESERVING = ["gcra", "token_bucket"]


def key(algorithm: str, window: float = 2.0) -> bytes:
    return f"redlease:ratelimit:api:{algorithm}:{round(window * 1000)}:{{s}}".encode()


@pytest.mark.parametrize("algorithm", RESERVING)
async def test_a_cancelled_waiter_gives_its_reservation_back(
    async_client: redis.asyncio.Redis, algorithm: str
) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=1, window=2.0, algorithm=algorithm)
    await limiter.acquire("s")
    before = await async_client.dump(key(algorithm))
    waiter = asyncio.ensure_future(limiter.acquire("s"))

    async def reserved() -> bool:
        return await async_client.dump(key(algorithm)) != before

    assert await wait_until(reserved)
    assert (await limiter.peek("s")).retry_after > 3.0  # the next hit waits behind it
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter

    async def given_back() -> bool:
        return (await limiter.peek("s")).retry_after <= 2.0  # its 2 s of debt are gone

    # Within 1 s: without the give-back the debt would stay above 3 s - 1 s.
    assert await wait_until(given_back, limit=1.0)


@pytest.mark.parametrize("algorithm", RESERVING)
async def test_twin_a_cancelled_waiter_under_a_later_one_keeps_its_slot_spent(
    async_client: redis.asyncio.Redis, algorithm: str
) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=1, window=1.0, algorithm=algorithm)
    await limiter.acquire("s")
    first = asyncio.ensure_future(limiter.acquire("s"))

    async def debt(seconds: float) -> bool:
        return (await limiter.peek("s")).retry_after > seconds

    assert await wait_until(lambda: debt(1.5))  # first reserved
    second = asyncio.ensure_future(limiter.acquire("s"))
    assert await wait_until(lambda: debt(2.5))  # second reserved on top
    first.cancel()
    await asyncio.sleep(0.2)  # the give-back ran, and found the later reservation
    assert (await limiter.peek("s")).retry_after > 2.0
    began = asyncio.get_running_loop().time()
    assert (await second).allowed  # its instant did not move
    assert asyncio.get_running_loop().time() - began > 1.0
