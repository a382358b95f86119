"""RateLimiter.acquire, throttle and shadow mode against a real server (asyncio; the sync
twin is generated)."""

from __future__ import annotations

import logging
import time
from itertools import pairwise
from typing import Any

import prometheus_client
import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease import metrics
from tests._async.helpers import wait_until
from tests.support import AsyncTasks, a_coroutine_function, a_plain_function

pytestmark = pytest.mark.timeout(60)
ALGORITHMS = ["fixed", "sliding", "gcra", "token_bucket"]
RESERVING = ["gcra", "token_bucket"]


def key(subject: str, algorithm: str, name: str = "api", window: float = 60.0) -> bytes:
    return f"redlease:ratelimit:{name}:{algorithm}:{round(window * 1000)}:{{{subject}}}".encode()


def out_of_order(finished: list[int]) -> list[tuple[int, int]]:
    """Pairs of waiters served against the order of their reservations."""
    return [(a, b) for a, b in pairwise(finished) if a > b]


def test_twin_out_of_order_finds_a_swap() -> None:
    assert out_of_order([0, 1, 2, 3]) == []
    assert out_of_order([0, 2, 1, 3]) == [(2, 1)]


# -- acquire --------------------------------------------------------------------------------
@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_acquire_passes_at_once_within_the_limit(
    async_client: redis.asyncio.Redis, algorithm: str
) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=3, window=60.0, algorithm=algorithm)
    answers = [await limiter.acquire("s") for _ in range(3)]
    assert [a.allowed for a in answers] == [True, True, True]
    assert [a.remaining for a in answers] == [2, 1, 0]
    assert not (await limiter.peek("s")).allowed  # all three were counted


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_acquire_waits_until_the_hit_passes(
    async_client: redis.asyncio.Redis, algorithm: str
) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=4, window=1.0, algorithm=algorithm)
    for _ in range(4):
        await limiter.acquire("s")
    began = time.monotonic()
    answer = await limiter.acquire("s")
    waited = time.monotonic() - began
    assert answer.allowed
    assert 0.05 < waited < 5.0  # one unit back after 0.25 s (gcra, bucket), the window's end


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_timeout_0_is_a_hit_that_raises_and_takes_nothing(
    async_client: redis.asyncio.Redis, algorithm: str
) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=2, window=60.0, algorithm=algorithm)
    assert (await limiter.acquire("s", timeout=0)).allowed
    assert (await limiter.acquire("s", timeout=0)).allowed
    stored = await async_client.dump(key("s", algorithm))
    with pytest.raises(redlease.RateLimitExceeded, match="cannot pass within") as info:
        await limiter.acquire("s", timeout=0)
    assert isinstance(info.value, redlease.RateLimitError)
    assert info.value.retry_after > 0 and info.value.timeout == 0
    assert await async_client.dump(key("s", algorithm)) == stored


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_a_wait_past_the_timeout_raises_at_once_and_reserves_nothing(
    async_client: redis.asyncio.Redis, algorithm: str
) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=1, window=30.0, algorithm=algorithm)
    await limiter.acquire("s")
    stored = await async_client.dump(key("s", algorithm, window=30.0))
    assert stored is not None
    began = time.monotonic()
    with pytest.raises(redlease.RateLimitExceeded) as info:
        await limiter.acquire("s", timeout=5.0)
    assert time.monotonic() - began < 4.0  # known at once: it does not sleep the timeout
    assert info.value.retry_after > 5.0
    assert await async_client.dump(key("s", algorithm, window=30.0)) == stored


@pytest.mark.parametrize("algorithm", RESERVING)
async def test_waiters_are_served_in_reservation_order(
    async_client: redis.asyncio.Redis, algorithm: str
) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=5, window=1.0, algorithm=algorithm)
    for _ in range(5):
        await limiter.acquire("s")
    finished: list[int] = []
    started = []
    for i in range(6):
        before = await async_client.dump(key("s", algorithm, window=1.0))

        async def wait(i: int = i) -> None:
            await limiter.acquire("s")
            finished.append(i)

        started.append(AsyncTasks.spawn(wait))

        async def reserved(before: Any = before) -> bool:
            return await async_client.dump(key("s", algorithm, window=1.0)) != before

        assert await wait_until(reserved)  # each waiter reserves after the one before
    for each in started:
        assert await AsyncTasks.outcome(each) is None
    assert sorted(finished) == list(range(6))
    assert out_of_order(finished) == []


@pytest.mark.parametrize("algorithm", RESERVING)
async def test_a_hit_waits_behind_the_reservations(
    async_client: redis.asyncio.Redis, algorithm: str
) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=2, window=1.0, algorithm=algorithm)
    await limiter.acquire("s")
    await limiter.acquire("s")
    waiters = [AsyncTasks.spawn(lambda: limiter.acquire("s")) for _ in range(2)]

    async def both_reserved() -> bool:
        return (await limiter.peek("s")).retry_after > 0.6

    assert await wait_until(both_reserved)  # two reservations: one second of debt
    assert not (await limiter.hit("s")).allowed  # a hit cannot overtake them
    for each in waiters:
        assert (await AsyncTasks.outcome(each)).allowed


async def test_several_limits_and_fixed_windows_wait_by_retrying(
    async_client: redis.asyncio.Redis,
) -> None:
    for algorithm in ("gcra", "fixed"):  # gcra: one limit reserves, two do not
        rate = "2/second;100/minute"
        limiter = redlease.RateLimiter(async_client, "api", rate=rate, algorithm=algorithm)
        answers = [await limiter.acquire("s") for _ in range(4)]
        assert all(a.allowed for a in answers)
        assert (await limiter.peek("s")).limits[1].remaining >= 96  # each counted once
    fixed = redlease.RateLimiter(async_client, "api", rate="2/second;100/minute")
    assert (await fixed.peek("s")).limits[1].remaining == 96


async def test_a_waiter_sends_no_command_while_it_sleeps(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port)
    limiter = redlease.RateLimiter(client, "api", limit=1, window=1.5, algorithm="gcra")
    await limiter.acquire("s")
    waiter = AsyncTasks.spawn(lambda: limiter.acquire("s"))

    async def reserved() -> bool:
        return (await limiter.peek("s")).retry_after > 1.0

    assert await wait_until(reserved)
    before = (await client.info("stats"))["total_commands_processed"]
    await AsyncTasks.sleep(0.5)
    after = (await client.info("stats"))["total_commands_processed"]
    assert after - before <= 1  # the INFO itself: the waiter sent nothing
    assert (await AsyncTasks.outcome(waiter)).allowed
    await client.aclose()


async def test_twin_a_polling_waiter_is_seen_by_the_command_count(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port)
    limiter = redlease.RateLimiter(client, "api", limit=1, window=1.5, algorithm="gcra")
    await limiter.acquire("s")

    async def poll() -> None:
        while not (await limiter.hit("s")).allowed:
            await AsyncTasks.sleep(0.05)

    waiter = AsyncTasks.spawn(poll)
    await AsyncTasks.sleep(0.1)
    before = (await client.info("stats"))["total_commands_processed"]
    await AsyncTasks.sleep(0.5)
    after = (await client.info("stats"))["total_commands_processed"]
    assert after - before > 1
    assert await AsyncTasks.outcome(waiter) is None
    await client.aclose()


@pytest.mark.parametrize(
    ("kwargs", "error", "arg"),
    [
        ({"cost": 0}, ValueError, "cost"),
        ({"cost": 4}, ValueError, "cost"),
        ({"cost": 1.0}, TypeError, "cost"),
        ({"timeout": -2}, ValueError, "timeout"),
        ({"timeout": "1"}, TypeError, "timeout"),
    ],
)
async def test_bad_acquire_arguments(
    async_client: redis.asyncio.Redis, kwargs: dict[str, Any], error: type, arg: str
) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=3, algorithm="gcra")
    with pytest.raises(error, match=f"^{arg} "):
        await limiter.acquire("s", **kwargs)
    with pytest.raises(ValueError, match=r"^key "):
        await limiter.acquire("")
    assert await async_client.keys("*") == []


# -- throttle -------------------------------------------------------------------------------
async def test_throttle_as_a_block_and_a_decorator(async_client: redis.asyncio.Redis) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=5, window=60.0, algorithm="gcra")
    async with limiter.throttle("partner") as answer:
        assert answer.allowed and answer.remaining == 4

    @limiter.throttle(key=lambda user, n: f"user:{user}", cost=2)
    async def call(user: str, n: int) -> int:
        return n * 2

    assert await call("a", 21) == 42
    assert (await limiter.peek("user:a")).remaining == 3
    assert call.__name__ == "call"
    assert (await limiter.peek("partner")).remaining == 4


async def test_throttle_refuses_what_it_cannot_do(async_client: redis.asyncio.Redis) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=3)
    with pytest.raises(TypeError, match=r"^key "):
        limiter.throttle(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^cost "):
        limiter.throttle("s", cost=4)
    with pytest.raises(TypeError, match="needs the call's arguments"):
        async with limiter.throttle(lambda: "s"):
            pass
    wrong = a_plain_function if AsyncTasks.ASYNC else a_coroutine_function
    with pytest.raises(TypeError, match="decorates"):
        limiter.throttle("s")(wrong)  # type: ignore[arg-type]
    with pytest.raises(redlease.RateLimitExceeded):
        for _ in range(4):
            async with limiter.throttle("t", timeout=0):
                pass


# -- shadow mode ----------------------------------------------------------------------------
@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_shadow_mode_refuses_nothing_and_counts_as_enforcing_would(
    async_client: redis.asyncio.Redis, algorithm: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="redlease")
    shadow = redlease.RateLimiter(
        async_client, "api", limit=2, window=60.0, algorithm=algorithm, mode="shadow"
    )
    answers = [await shadow.hit("s") for _ in range(4)]
    assert all(a.allowed for a in answers)
    assert [a.shadowed for a in answers] == [False, False, True, True]
    assert not answers[3].limits[0].allowed  # which limit refused it
    enforcing = redlease.RateLimiter(async_client, "api", limit=2, window=60.0, algorithm=algorithm)
    assert not (await enforcing.peek("s")).allowed and (await enforcing.peek("s")).remaining == 0
    records = [r for r in caplog.records if getattr(r, "redlease_event", "") == "ratelimit_shadow"]
    assert len(records) == 2 and records[0].levelno == logging.INFO
    assert records[0].redlease_subject == "s" and records[0].redlease_name == "api"  # type: ignore[attr-defined]
    began = time.monotonic()
    assert (await shadow.acquire("s")).shadowed  # acquire does not wait either
    assert time.monotonic() - began < 5.0


async def test_twin_enforce_mode_refuses_and_logs_nothing(
    async_client: redis.asyncio.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="redlease")
    limiter = redlease.RateLimiter(async_client, "api", limit=1, window=60.0)
    await limiter.hit("s")
    refused = await limiter.hit("s")
    assert not refused.allowed and not refused.shadowed
    assert not [r for r in caplog.records if getattr(r, "redlease_event", "") == "ratelimit_shadow"]


async def test_shadow_refusals_are_exported(async_client: redis.asyncio.Redis) -> None:
    registry = prometheus_client.CollectorRegistry()
    previous = metrics.use(metrics.PrometheusMetrics(registry))
    try:
        limiter = redlease.RateLimiter(async_client, "api", limit=1, mode="shadow")
        for _ in range(3):
            await limiter.hit("s")
    finally:
        metrics.use(previous)
    value = registry.get_sample_value("redlease_ratelimit_shadowed_total", {"name": "api"})
    assert value == 2


async def test_bad_mode(async_client: redis.asyncio.Redis) -> None:
    with pytest.raises(ValueError, match=r"^mode "):
        redlease.RateLimiter(async_client, "api", mode="dry-run")
    with pytest.raises(TypeError, match=r"^mode "):
        redlease.RateLimiter(async_client, "api", mode=None)  # type: ignore[arg-type]
