"""Several limits in one check, and the sliding and token-bucket algorithms, on a real server
(asyncio; tests/_sync/test_ratelimit_limits.py is generated)."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from tests._async.helpers import wait_until
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)
ALGORITHMS = ["fixed", "sliding", "gcra", "token_bucket"]


def keys(subject: str, algorithm: str, *windows_ms: int, name: str = "api") -> list[bytes]:
    return [f"redlease:ratelimit:{name}:{algorithm}:{w}:{{{subject}}}".encode() for w in windows_ms]


# -- several limits -------------------------------------------------------------------------
@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_a_hit_refused_by_one_limit_is_counted_by_none(
    async_client: redis.asyncio.Redis, algorithm: str
) -> None:
    limiter = redlease.RateLimiter(
        async_client, "api", rate="10/minute;2/hour", algorithm=algorithm
    )
    assert [(await limiter.hit("s")).allowed for _ in range(2)] == [True, True]
    before = [await async_client.dump(k) for k in keys("s", algorithm, 60_000, 3_600_000)]
    refused = await limiter.hit("s")
    assert not refused.allowed
    assert (refused.limit, refused.window) == (2, 3600.0)  # the hour refused it
    assert [r.allowed for r in refused.limits] == [True, False]
    assert refused.limits[0].remaining == 8  # the minute still has 10 - 2: nothing taken
    after = [await async_client.dump(k) for k in keys("s", algorithm, 60_000, 3_600_000)]
    assert after == before


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_twin_checked_one_limiter_after_another_the_refusal_is_counted(
    async_client: redis.asyncio.Redis, algorithm: str
) -> None:
    """The bug the single script avoids: checked one after the other (xmtp/xmtpd#1249), the
    minute limiter has taken a unit for a hit the hour limiter then refused."""
    minute = redlease.RateLimiter(async_client, "m", rate="10/minute", algorithm=algorithm)
    hour = redlease.RateLimiter(async_client, "h", rate="2/hour", algorithm=algorithm)

    async def both() -> bool:
        return (await minute.hit("s")).allowed and (await hour.hit("s")).allowed

    assert [await both() for _ in range(3)] == [True, True, False]
    assert (await minute.peek("s")).remaining == 7  # 10 - 3: the refused hit was counted


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_the_tightest_limit_answers_and_every_key_expires(
    async_client: redis.asyncio.Redis, algorithm: str
) -> None:
    limiter = redlease.RateLimiter(
        async_client, "api", rate="5/second;100/day;8/minute", algorithm=algorithm
    )
    assert [(r.amount, r.window) for r in limiter.rates] == [(5, 1.0), (8, 60.0), (100, 86400.0)]
    first = await limiter.hit("s", cost=2)
    assert first.allowed and (first.limit, first.remaining) == (5, 3)
    assert [r.remaining for r in first.limits] == [3, 6, 98]
    for k in keys("s", algorithm, 1000, 60_000, 86_400_000):
        assert await async_client.pttl(k) > 0
    peeked = await limiter.peek("s", cost=4)
    assert not peeked.allowed and peeked.window == 1.0
    assert [r.allowed for r in peeked.limits] == [False, True, True]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_reset_and_peek_cover_every_limit(
    async_client: redis.asyncio.Redis, algorithm: str
) -> None:
    limiter = redlease.RateLimiter(async_client, "api", rate="1/minute;3/hour", algorithm=algorithm)
    assert (await limiter.peek("s")).allowed
    assert await async_client.exists(*keys("s", algorithm, 60_000, 3_600_000)) == 0
    await limiter.hit("s")
    assert await async_client.exists(*keys("s", algorithm, 60_000, 3_600_000)) == 2
    assert await limiter.reset("s") is True
    assert await async_client.exists(*keys("s", algorithm, 60_000, 3_600_000)) == 0
    assert await limiter.reset("s") is False


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_concurrent_hits_never_pass_any_limit(
    async_client: redis.asyncio.Redis, algorithm: str
) -> None:
    limiter = redlease.RateLimiter(
        async_client, "api", rate="50/minute;7/hour", algorithm=algorithm
    )

    async def hit() -> bool:
        return (await limiter.hit("hot")).allowed

    assert sum(await AsyncTasks.gather(*[hit] * 30)) == 7
    assert (await limiter.peek("hot")).limits[0].remaining == 43


# -- token bucket ---------------------------------------------------------------------------
async def test_token_bucket_bursts_then_refills_at_the_rate(
    async_client: redis.asyncio.Redis,
) -> None:
    limiter = redlease.RateLimiter(
        async_client, "api", rate="2/second", algorithm="token_bucket", burst=5
    )
    results = [await limiter.hit("s") for _ in range(6)]
    assert [r.allowed for r in results] == [True] * 5 + [False]
    assert [r.remaining for r in results[:5]] == [4, 3, 2, 1, 0]
    assert 0 < results[5].retry_after <= 0.5  # one token every 1/2 s
    assert 2.0 < results[5].reset_after <= 2.5  # 5 tokens back at 2 per second

    async def passes() -> bool:
        return (await limiter.peek("s")).allowed

    assert await wait_until(passes)
    assert (await limiter.hit("s")).remaining == 0  # one token came back, not the burst
    with pytest.raises(ValueError, match="could never pass"):
        await limiter.hit("s", cost=6)


# -- sliding window -------------------------------------------------------------------------
async def test_sliding_window_spreads_the_next_window(async_client: redis.asyncio.Redis) -> None:
    limiter = redlease.RateLimiter(async_client, "api", rate="4/second", algorithm="sliding")
    _, micros = await async_client.time()  # start just after a window begins (server clock),
    await AsyncTasks.sleep(1.0 - int(micros) / 1e6 + 0.02)  # so all 5 hits fall in one
    results = [await limiter.hit("s") for _ in range(5)]
    assert [r.allowed for r in results] == [True] * 4 + [False]
    refused = results[4]
    # The next window weighs this one's 4 hits: one more passes only when 1/4 of it is over.
    assert 0.25 <= refused.retry_after <= 1.25
    assert refused.retry_after < refused.reset_after <= 2.0
    stored = await async_client.hgetall(b"redlease:ratelimit:api:sliding:1000:{s}")
    assert (stored[b"c"], stored[b"p"]) == (b"4", b"0")


# -- bad input ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "error", "says"),
    [
        ({"rate": "3/second", "limit": 3}, ValueError, "rate and limit/window are exclusive"),
        ({"rate": "3/second", "window": 1.0}, ValueError, "rate and limit/window are exclusive"),
        ({"rate": "3/fortnight"}, ValueError, "rate must be limits"),
        ({"rate": 3}, TypeError, "rate must be a str"),
        ({"rate": "1/minute;2/60 seconds"}, ValueError, "rate has two limits over one window"),
        ({"burst": 5}, ValueError, "burst applies to algorithm='token_bucket' only"),
        ({"burst": 0, "algorithm": "token_bucket"}, ValueError, "burst must be"),
        ({"burst": "5", "algorithm": "token_bucket"}, TypeError, "burst must be"),
    ],
)
async def test_bad_limits(
    async_client: redis.asyncio.Redis, kwargs: dict[str, Any], error: type, says: str
) -> None:
    with pytest.raises(error, match=f"^{says}"):
        redlease.RateLimiter(async_client, "api", **kwargs)


async def test_a_cost_above_the_smallest_limit_is_refused_before_sending(
    async_client: redis.asyncio.Redis,
) -> None:
    limiter = redlease.RateLimiter(async_client, "api", rate="3/second;100/day")
    with pytest.raises(ValueError, match=r"^cost must be at most the limit \(3\)"):
        await limiter.hit("s", cost=4)
    assert await async_client.dbsize() == 0
