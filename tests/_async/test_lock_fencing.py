"""Lock fences against a real server: they grow across holders, and catch a stale one
(asyncio; tests/_sync/test_lock_fencing.py is generated)."""

from __future__ import annotations

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from tests._async.helpers import wait_until
from tests._async.lock_helpers import is_free, keys

pytestmark = pytest.mark.timeout(60)


# -- fencing --------------------------------------------------------------------------------
async def test_fence_increases_across_holders_and_expiry(async_client: redis.asyncio.Redis) -> None:
    fences = []
    for _ in range(3):
        async with redlease.Lock(async_client, "fence") as lock:
            fences.append(lock.fence)
    stale = redlease.Lock(async_client, "fence", ttl=0.1, renew=False)
    await stale.acquire()
    fences.append(stale.fence)
    assert await wait_until(lambda: is_free(async_client, "fence"))
    async with redlease.Lock(async_client, "fence", timeout=5) as taker:
        fences.append(taker.fence)
    assert fences == sorted(fences) and len(set(fences)) == len(fences)
    with pytest.raises(redlease.LockLost, match="lost"):
        await stale.release()
    # no redlease operation resets the counter
    assert int(await async_client.get(keys("fence").fence)) == fences[-1]


async def test_fencing_rejects_a_stale_holder_and_its_twin_does_not(
    async_client: redis.asyncio.Redis,
) -> None:
    """A holder that pauses past its lease writes late: the fence catches it; no fence, no catch."""

    async def fenced_write(value: str, fence: int) -> bool:
        # The storage side of fencing: accept a write only with a fence >= the highest seen.
        script = (
            "local seen = tonumber(redis.call('GET', KEYS[2]) or '0') "
            "if tonumber(ARGV[2]) < seen then return 0 end "
            "redis.call('SET', KEYS[2], ARGV[2]) redis.call('SET', KEYS[1], ARGV[1]) return 1"
        )
        return bool(await async_client.eval(script, 2, "{data}", "{data}:fence", value, fence))

    paused = redlease.Lock(async_client, "store", ttl=0.1, renew=False)
    await paused.acquire()
    paused_fence = paused.fence or 0
    assert await wait_until(
        lambda: is_free(async_client, "store")
    )  # the "pause" outlives the lease
    async with redlease.Lock(async_client, "store", timeout=5) as fresh:
        assert await fenced_write("fresh", fresh.fence or 0)
    assert not await fenced_write("stale", paused_fence)  # fencing rejects the late write
    assert await async_client.get("{data}") == b"fresh"
    await async_client.set("{data}", "stale")  # the twin: an unfenced late write corrupts
    assert await async_client.get("{data}") == b"stale"
