"""RateLimiter against a real server (asyncio; tests/_sync/test_ratelimit.py is generated)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import redis.asyncio
from redis.exceptions import ConnectionError, TimeoutError

import redlease.asyncio as redlease
from tests._async.helpers import wait_until
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)
ALGORITHMS = ["fixed", "sliding", "gcra", "token_bucket"]


def key(subject: str, algorithm: str = "fixed", name: str = "api", window: float = 60.0) -> bytes:
    return f"redlease:ratelimit:{name}:{algorithm}:{round(window * 1000)}:{{{subject}}}".encode()


# -- both algorithms ------------------------------------------------------------------------
@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_a_burst_of_limit_passes_then_hits_are_refused(
    async_client: redis.asyncio.Redis, algorithm: str
) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=3, window=60.0, algorithm=algorithm)
    results = [await limiter.hit("user:42") for _ in range(5)]
    assert [r.allowed for r in results] == [True, True, True, False, False]
    assert [r.remaining for r in results] == [2, 1, 0, 0, 0]
    assert all(r.retry_after == 0.0 for r in results[:3])
    assert all(r.limit == 3 for r in results)
    refused = results[3]
    # fixed: the window's end; gcra, token_bucket: one unit comes back every window / limit;
    # sliding: within the next aligned window, which ends at most two windows from now
    longest = {"fixed": 60.0, "gcra": 20.0, "token_bucket": 20.0, "sliding": 120.0}[algorithm]
    assert 0 < refused.retry_after <= longest
    assert 0 < refused.reset_after <= (120.0 if algorithm == "sliding" else 60.0)
    assert await async_client.pttl(key("user:42", algorithm)) > 0


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_refused_hits_are_not_counted(
    async_client: redis.asyncio.Redis, algorithm: str
) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=2, window=60.0, algorithm=algorithm)
    await limiter.hit("s")
    await limiter.hit("s")
    stored = await async_client.dump(key("s", algorithm))
    for _ in range(10):
        assert not (await limiter.hit("s")).allowed
    assert await async_client.dump(key("s", algorithm)) == stored


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_cost_takes_several_units(async_client: redis.asyncio.Redis, algorithm: str) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=5, window=60.0, algorithm=algorithm)
    assert (await limiter.hit("s", cost=5)).remaining == 0
    assert not (await limiter.hit("s", cost=1)).allowed
    other = await limiter.hit("t", cost=3)
    assert (other.allowed, other.remaining) == (True, 2)
    refused = await limiter.hit("t", cost=3)
    assert (refused.allowed, refused.remaining) == (False, 2)  # a smaller cost still fits
    assert (await limiter.hit("t", cost=2)).allowed


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_peek_takes_nothing(async_client: redis.asyncio.Redis, algorithm: str) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=2, window=60.0, algorithm=algorithm)
    fresh = await limiter.peek("s")
    assert (fresh.allowed, fresh.remaining, fresh.retry_after, fresh.reset_after) == (
        True,
        2,
        0.0,
        0.0,
    )
    assert await async_client.exists(key("s", algorithm)) == 0  # read-only
    await limiter.hit("s")
    assert (await limiter.peek("s")).remaining == 1
    assert not (await limiter.peek("s", cost=2)).allowed
    assert (await limiter.peek("s", cost=1)).allowed
    await limiter.hit("s")
    full = await limiter.peek("s")
    assert (full.allowed, full.remaining) == (False, 0)
    assert full.retry_after > 0 and full.reset_after > 0


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_reset_forgets_a_subject(async_client: redis.asyncio.Redis, algorithm: str) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=1, window=60.0, algorithm=algorithm)
    await limiter.hit("s")
    assert not (await limiter.hit("s")).allowed
    assert await limiter.reset("s") is True
    assert await limiter.reset("s") is False
    assert (await limiter.hit("s")).allowed


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_subjects_and_limiters_are_independent(
    async_client: redis.asyncio.Redis, algorithm: str
) -> None:
    api = redlease.RateLimiter(async_client, "api", limit=1, window=60.0, algorithm=algorithm)
    login = redlease.RateLimiter(async_client, "login", limit=1, window=60.0, algorithm=algorithm)
    assert (await api.hit("a")).allowed
    assert (await api.hit("b")).allowed
    assert (await api.hit(b"c\xff")).allowed
    assert (await login.hit("a")).allowed
    assert not (await api.hit("a")).allowed


async def test_a_name_with_braces_is_accepted_and_keeps_the_subject_as_hash_tag(
    async_client: redis.asyncio.Redis,
) -> None:
    limiter = redlease.RateLimiter(async_client, "api{v2}", limit=1, window=60.0)
    assert (await limiter.hit("user:42")).allowed
    assert not (await limiter.hit("user:42")).allowed
    other = redlease.RateLimiter(async_client, "api%7Bv2%7D", limit=1, window=60.0)
    assert (await other.hit("user:42")).allowed  # an escaped lookalike is another limiter
    assert await async_client.exists(key("user:42", name="api%7Bv2%7D")) == 1


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_a_limiter_reconfigured_to_a_shorter_window_starts_afresh(
    async_client: redis.asyncio.Redis, algorithm: str
) -> None:
    """ "5/day" becomes "5/second": the new limiter must not refuse for a day."""
    old = redlease.RateLimiter(async_client, "api", rate="5/day", algorithm=algorithm)
    for _ in range(5):
        assert (await old.hit("s")).allowed
    new = redlease.RateLimiter(async_client, "api", rate="5/second", algorithm=algorithm)
    fresh = await new.hit("s")
    assert fresh.allowed and fresh.remaining == 4


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_twin_the_same_window_again_reads_the_old_hits(
    async_client: redis.asyncio.Redis, algorithm: str
) -> None:
    """The check above can fail: a limiter with the old window reads what was counted."""
    old = redlease.RateLimiter(async_client, "api", rate="5/day", algorithm=algorithm)
    for _ in range(5):
        assert (await old.hit("s")).allowed
    same = redlease.RateLimiter(async_client, "api", rate="5/day", algorithm=algorithm)
    refused = await same.hit("s")
    assert not refused.allowed and refused.retry_after > 1.0


async def test_algorithms_use_separate_keys(async_client: redis.asyncio.Redis) -> None:
    fixed = redlease.RateLimiter(async_client, "api", limit=1, window=60.0)
    gcra = redlease.RateLimiter(async_client, "api", limit=1, window=60.0, algorithm="gcra")
    assert (await fixed.hit("user:42")).allowed
    assert (await gcra.hit("user:42")).allowed
    assert set(await async_client.keys("*")) == {key("user:42", "fixed"), key("user:42", "gcra")}


@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_concurrent_hits_never_pass_the_limit(
    async_client: redis.asyncio.Redis, algorithm: str
) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=10, window=60.0, algorithm=algorithm)

    async def hit() -> bool:
        return (await limiter.hit("hot")).allowed

    assert sum(await AsyncTasks.gather(*[hit] * 40)) == 10


# -- fixed window ---------------------------------------------------------------------------
async def test_fixed_window_starts_at_the_first_hit_and_ends(
    async_client: redis.asyncio.Redis,
) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=2, window=0.3)
    first = await limiter.hit("s")
    assert first.reset_after == 0.3  # the window starts now
    await limiter.hit("s")
    assert not (await limiter.hit("s")).allowed

    async def passes() -> bool:
        return (await limiter.peek("s")).allowed

    assert await wait_until(passes)
    again = await limiter.hit("s")
    assert (again.allowed, again.remaining) == (True, 1)  # a fresh window


async def test_fixed_window_repairs_a_counter_without_expiry(
    async_client: redis.asyncio.Redis,
) -> None:
    """The non-atomic seed pattern can leave an INCR'd counter whose EXPIRE never ran."""
    await async_client.set(key("s", window=30.0), 5)
    limiter = redlease.RateLimiter(async_client, "api", limit=5, window=30.0)
    peeked = await limiter.peek("s")
    assert not peeked.allowed and peeked.reset_after == 30.0
    assert await async_client.pttl(key("s", window=30.0)) == -1  # peek never writes
    refused = await limiter.hit("s")
    assert not refused.allowed
    assert 0 < await async_client.pttl(key("s", window=30.0)) <= 30_000  # it cannot refuse forever
    assert await async_client.get(key("s", window=30.0)) == b"5"


# -- GCRA -----------------------------------------------------------------------------------
async def test_gcra_gives_back_one_unit_per_interval(async_client: redis.asyncio.Redis) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=4, window=2.0, algorithm="gcra")
    for _ in range(4):
        assert (await limiter.hit("s")).allowed
    refused = await limiter.hit("s")
    assert not refused.allowed
    assert 0 < refused.retry_after <= 0.5  # window / limit, not the whole window
    assert refused.retry_after < refused.reset_after <= 2.0

    async def passes() -> bool:
        return (await limiter.peek("s")).allowed

    assert await wait_until(passes)
    one = await limiter.hit("s")
    assert one.allowed and one.remaining <= 1  # units come back one by one, not all at once


async def test_gcra_state_expires_once_fully_reset(async_client: redis.asyncio.Redis) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=2, window=0.2, algorithm="gcra")
    hit = await limiter.hit("s")
    assert hit.reset_after == pytest.approx(0.1, abs=0.002)
    assert 0 < await async_client.pttl(key("s", "gcra", window=0.2)) <= 100

    async def gone() -> bool:
        return await async_client.exists(key("s", "gcra", window=0.2)) == 0

    assert await wait_until(gone)
    assert (await limiter.peek("s")).remaining == 2


# -- bad input ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "error", "arg"),
    [
        ({"limit": 0}, ValueError, "limit"),
        ({"limit": -1}, ValueError, "limit"),
        ({"limit": 1.5}, TypeError, "limit"),
        ({"limit": True}, TypeError, "limit"),
        ({"limit": "3"}, TypeError, "limit"),
        ({"window": 0}, ValueError, "window"),
        ({"window": -1.0}, ValueError, "window"),
        ({"window": math.inf}, ValueError, "window"),
        ({"window": math.nan}, ValueError, "window"),
        ({"window": "60"}, TypeError, "window"),
        ({"algorithm": "leaky"}, ValueError, "algorithm"),
        ({"algorithm": None}, TypeError, "algorithm"),
        ({"prefix": "a b"}, ValueError, "prefix"),
    ],
)
async def test_bad_limiter_arguments(
    async_client: redis.asyncio.Redis, kwargs: dict[str, Any], error: type, arg: str
) -> None:
    with pytest.raises(error, match=f"^{arg} "):
        redlease.RateLimiter(async_client, "api", **kwargs)


async def test_bad_names_and_clients(async_client: redis.asyncio.Redis) -> None:
    with pytest.raises(ValueError, match=r"^name "):
        redlease.RateLimiter(async_client, "")
    with pytest.raises(TypeError, match="client must be a redis"):
        redlease.RateLimiter(AsyncTasks.WRONG_CLIENT(), "api")  # type: ignore[arg-type]


@pytest.mark.parametrize("method", ["hit", "peek"])
@pytest.mark.parametrize(
    ("args", "error", "arg"),
    [
        (("s", 0), ValueError, "cost"),
        (("s", 4), ValueError, "cost"),
        (("s", 1.0), TypeError, "cost"),
        (("s", True), TypeError, "cost"),
        (("", 1), ValueError, "key"),
        ((None, 1), TypeError, "key"),
    ],
)
async def test_bad_hit_arguments(
    async_client: redis.asyncio.Redis, method: str, args: tuple[Any, ...], error: type, arg: str
) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=3)
    with pytest.raises(error, match=f"^{arg} "):
        await getattr(limiter, method)(*args)
    assert await async_client.keys("*") == []


async def test_a_cost_above_the_limit_says_it_could_never_pass(
    async_client: redis.asyncio.Redis,
) -> None:
    limiter = redlease.RateLimiter(async_client, "api", limit=3)
    with pytest.raises(ValueError, match="never pass"):
        await limiter.hit("s", cost=4)


# -- outages --------------------------------------------------------------------------------
@pytest.mark.parametrize("algorithm", ALGORITHMS)
async def test_outage_raises_rate_limit_unavailable(make_server: Any, algorithm: str) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=0.5)
    limiter = redlease.RateLimiter(client, "down", algorithm=algorithm)
    assert (await limiter.hit("s")).allowed
    srv.stop()
    for action, call in (
        ("hit", lambda: limiter.hit("s")),
        ("peek", lambda: limiter.peek("s")),
        ("reset", lambda: limiter.reset("s")),
    ):
        with pytest.raises(
            redlease.RateLimitUnavailable, match=f"could not {action} rate limiter 'down'"
        ) as info:
            await call()
        assert isinstance(info.value.__cause__, (ConnectionError, TimeoutError, OSError))
        assert isinstance(info.value, redlease.RateLimitError)
    await client.aclose()
