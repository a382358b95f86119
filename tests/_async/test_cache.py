"""redlease.cached against a real server (asyncio; tests/_sync/test_cache.py is generated).

The 16-process figures (one computation on a cold key, and its twin without redlease) are in
tests/test_cache_processes.py.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import prometheus_client
import pytest
import redis.asyncio
import redis.exceptions
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import redlease.asyncio as redlease
from redlease._core import cache
from redlease.metrics import Observer, OpenTelemetryMetrics, PrometheusMetrics, use
from tests._async.helpers import wait_until
from tests.support import AsyncTasks
from tests.topology import RedisClusterServers

pytestmark = pytest.mark.timeout(60)


class Lookups(Observer):
    """Counts cache outcomes."""

    def __init__(self) -> None:
        self.outcomes: Counter[str] = Counter()

    def cache_lookup(self, name: str, outcome: str) -> None:
        self.outcomes[outcome] += 1


@pytest.fixture
def lookups() -> Iterator[Lookups]:
    observer = Lookups()
    previous = use(observer)
    yield observer
    use(previous)


# -- hits, misses, keys ---------------------------------------------------------------------
async def test_a_value_is_computed_once_then_served(
    async_client: redis.asyncio.Redis, lookups: Lookups
) -> None:
    calls: list[str] = []

    @redlease.cached(async_client, ttl=30, name="report")
    async def report(day: str, *, detail: bool = False) -> dict[str, Any]:
        calls.append(day)
        return {"day": day, "detail": detail, "rows": [1, 2]}

    assert await report("mon") == {"day": "mon", "detail": False, "rows": [1, 2]}
    assert await report("mon") == {"day": "mon", "detail": False, "rows": [1, 2]}
    assert await report("mon", detail=True) == {"day": "mon", "detail": True, "rows": [1, 2]}
    assert calls == ["mon", "mon"]
    assert lookups.outcomes == {"miss": 2, "hit": 1}
    assert report.__name__ == "report"
    name = report.key_for("mon")
    assert name.startswith(b"cache:report:")
    assert name == report.key_for("mon") != report.key_for("tue")
    stored = await async_client.hgetall(b"redlease:{" + name + b"}:cached")
    assert json.loads(stored[b"value"]) == {"day": "mon", "detail": False, "rows": [1, 2]}
    assert 0 < await async_client.pttl(b"redlease:{" + name + b"}:cached") <= 30_000


async def test_invalidate_drops_the_value(async_client: redis.asyncio.Redis) -> None:
    calls: list[int] = []

    @redlease.cached(async_client, ttl=30, name="square")
    async def square(x: int) -> int:
        calls.append(x)
        return x * x

    assert await square(3) == 9
    assert await square.invalidate(3) is True
    assert await square.invalidate(3) is False
    assert await square(3) == 9
    assert calls == [3, 3]


async def test_key_as_a_name_or_a_function(async_client: redis.asyncio.Redis) -> None:
    @redlease.cached(async_client, ttl=30, key="users")
    async def user(uid: int) -> str:
        return f"user {uid}"

    @redlease.cached(async_client, ttl=30, key=lambda obj: f"obj:{obj.id}")
    async def describe(obj: Any) -> str:
        return f"object {obj.id}"

    class Thing:
        id = 7

    assert user.key_for(1).startswith(b"cache:users:")
    assert await user(1) == "user 1"
    assert describe.key_for(Thing()) == b"cache:obj:7"
    assert await describe(Thing()) == "object 7"
    assert await async_client.exists(b"redlease:{cache:obj:7}:cached") == 1


async def test_bad_arguments_are_refused_before_anything_is_sent(
    async_client: redis.asyncio.Redis,
) -> None:
    async def f(x: Any) -> Any:
        return x

    with pytest.raises(ValueError, match="ttl"):
        redlease.cached(async_client, ttl=0)
    with pytest.raises(ValueError, match="stale"):
        redlease.cached(async_client, ttl=1, stale=-1)
    with pytest.raises(ValueError, match="lock_ttl"):
        redlease.cached(async_client, ttl=1, lock_ttl=0.001)
    with pytest.raises(TypeError, match="serializer"):
        redlease.cached(async_client, ttl=1, serializer=object())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key"):
        redlease.cached(async_client, ttl=1, key=3)(f)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name="):
        redlease.cached(async_client, ttl=1)(f)  # a function defined inside another
    with pytest.raises(TypeError, match="name"):
        redlease.cached(async_client, ttl=1, name=3)(f)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not both"):
        redlease.cached(async_client, ttl=1, name="f", key="g")(f)
    with pytest.raises(TypeError, match="argument 'x' is of type object"):
        await redlease.cached(async_client, ttl=1, name="f")(f)(object())
    with pytest.raises(TypeError, match="missing a required argument: 'x'"):
        await redlease.cached(async_client, ttl=1, name="f")(f)()
    assert await async_client.dbsize() == 0


async def test_a_result_the_serializer_refuses_is_a_type_error(
    async_client: redis.asyncio.Redis,
) -> None:
    @redlease.cached(async_client, ttl=1, name="raw")
    async def raw() -> bytes:
        return b"bytes are not JSON"

    with pytest.raises(TypeError, match="serializer="):
        await raw()
    assert await async_client.exists(b"redlease:{" + raw.key_for() + b"}:cached") == 0


async def test_the_wrong_kind_of_client_is_a_type_error_at_decoration() -> None:
    async def f() -> int:
        return 1

    with pytest.raises(TypeError, match="client"):
        redlease.cached(AsyncTasks.WRONG_CLIENT(), ttl=1)(f)  # type: ignore[arg-type]


# -- one computation per key ----------------------------------------------------------------
async def test_concurrent_callers_on_a_cold_key_compute_it_once(
    async_client: redis.asyncio.Redis, lookups: Lookups
) -> None:
    calls: list[int] = []

    @redlease.cached(async_client, ttl=30, name="slow")
    async def slow() -> int:
        calls.append(1)
        await AsyncTasks.sleep(0.3)
        return 42

    async def call() -> int:
        return await slow()

    assert await AsyncTasks.gather(*[call] * 8) == [42] * 8
    assert len(calls) == 1
    assert lookups.outcomes == {"miss": 1, "wait": 7}


async def test_a_rebuild_longer_than_lock_ttl_lets_the_next_caller_compute(
    async_client: redis.asyncio.Redis, lookups: Lookups
) -> None:
    """Waiters are bounded by lock_ttl: they do not hang on a stuck rebuild."""
    calls: list[float] = []

    @redlease.cached(async_client, ttl=30, lock_ttl=0.3, name="stuck")
    async def stuck() -> str:
        calls.append(time.monotonic())
        await AsyncTasks.sleep(3.0)
        return "done"

    async def late() -> str:
        await AsyncTasks.sleep(0.1)
        return await stuck()

    assert await AsyncTasks.gather(stuck, late) == ["done", "done"]
    assert len(calls) == 2
    assert calls[1] - calls[0] < 2.5  # started long before the first one ended


# -- stale while revalidate -----------------------------------------------------------------
async def test_stale_values_are_served_at_once_while_one_refresh_runs(
    async_client: redis.asyncio.Redis, lookups: Lookups
) -> None:
    calls: list[int] = []

    @redlease.cached(async_client, ttl=0.3, stale=30, name="version")
    async def version() -> int:
        calls.append(1)
        await AsyncTasks.sleep(2.0)
        return len(calls)

    assert await version() == 1
    await AsyncTasks.sleep(0.5)  # past ttl, within stale

    async def timed() -> tuple[int, float]:
        started = time.monotonic()
        value = await version()
        return value, time.monotonic() - started

    answers = await AsyncTasks.gather(*[timed] * 6)
    assert [value for value, _ in answers] == [1] * 6  # the old value...
    assert max(took for _, took in answers) < 1.5  # ... without waiting for the 2 s refresh
    assert await wait_until(lambda: _equals(version, 2), limit=10.0)
    assert len(calls) == 2  # one refresh for six stale callers
    assert lookups.outcomes["stale"] >= 6


async def test_a_refresh_that_found_the_lock_taken_does_not_block_later_ones(
    async_client: redis.asyncio.Redis,
) -> None:
    calls: list[int] = []

    @redlease.cached(async_client, ttl=0.2, stale=30, name="version")
    async def version() -> int:
        calls.append(1)
        return len(calls)

    assert await version() == 1
    await AsyncTasks.sleep(0.3)
    rebuild = redlease.Lock(async_client, version.key_for(), ttl=10)
    assert await rebuild.acquire()  # someone else is refreshing it
    for _ in range(5):  # each stale call tries a refresh; each finds the lock taken
        assert await version() == 1
        await AsyncTasks.sleep(0.05)
    await rebuild.release()
    assert await wait_until(lambda: _refreshed(version), limit=10.0)
    assert len(calls) == 2


async def _refreshed(func: Any) -> bool:
    return bool(await func() == 2)


async def _equals(func: Any, value: Any) -> bool:
    return bool(await func() == value)


async def test_without_stale_an_expired_value_is_computed_again(
    async_client: redis.asyncio.Redis,
) -> None:
    calls: list[int] = []

    @redlease.cached(async_client, ttl=0.2, name="version")
    async def version() -> int:
        calls.append(1)
        return len(calls)

    assert await version() == 1
    await AsyncTasks.sleep(0.4)
    assert await version() == 2


# -- a late rebuild cannot overwrite a newer value ------------------------------------------
async def test_a_rebuild_paused_past_its_lease_does_not_overwrite_a_newer_value(
    async_client: redis.asyncio.Redis,
) -> None:
    source = {"value": "old"}

    @redlease.cached(async_client, ttl=30, lock_ttl=0.3, name="read")
    async def read() -> str:
        seen = source["value"]
        if seen == "old":
            await AsyncTasks.sleep(2.5)  # paused past its 0.3 s lease
        return seen

    async def newer() -> str:
        await AsyncTasks.sleep(0.5)  # the first rebuild's lease has run out
        source["value"] = "new"
        return await read()

    assert await AsyncTasks.gather(read, newer) == ["old", "new"]
    assert await read() == "new"  # the paused rebuild's late write was refused


async def test_twin_a_plain_set_after_a_pause_overwrites_the_newer_value(
    async_client: redis.asyncio.Redis,
) -> None:
    """The hand-written recipe (docs/recipes.md): lock, re-check, compute, SET."""
    source = {"value": "old"}

    async def read() -> str:
        cached = await async_client.get("page")
        if cached is not None:
            return str(cached.decode())
        async with redlease.Lock(async_client, "rebuild:page", ttl=0.3, renew=False):
            cached = await async_client.get("page")
            if cached is not None:
                return str(cached.decode())
            seen = source["value"]
            if seen == "old":
                await AsyncTasks.sleep(2.5)
            await async_client.set("page", seen, ex=30)
            return seen

    async def newer() -> str:
        await AsyncTasks.sleep(0.5)
        source["value"] = "new"
        return await read()

    with pytest.raises(redlease.LockLost):  # the recipe's release finds its lease gone...
        await AsyncTasks.gather(read, newer)
    assert await read() == "old"  # ... after its SET overwrote the newer value


async def test_invalidate_stops_a_running_rebuild_from_storing(
    async_client: redis.asyncio.Redis,
) -> None:
    @redlease.cached(async_client, ttl=30, name="slow")
    async def slow() -> str:
        await AsyncTasks.sleep(1.5)
        return "computed before the invalidation"

    async def invalidate() -> bool:
        await AsyncTasks.sleep(0.5)
        return bool(await slow.invalidate())

    assert await AsyncTasks.gather(slow, invalidate) == ["computed before the invalidation", False]
    assert await async_client.exists(b"redlease:{" + slow.key_for() + b"}:cached") == 0


async def test_the_rebuild_counter_expires_and_restarts_above_every_older_fence(
    async_client: redis.asyncio.Redis,
) -> None:
    """No key is kept forever per cached value, and a rebuild paused across the counter's
    expiry is still refused: the counter starts again at the server's time in µs."""

    @redlease.cached(async_client, ttl=0.2, lock_ttl=0.05, name="value")
    async def value() -> str:
        return "new"

    keys = cache.CacheKeys.build("redlease", value.key_for())
    assert await value() == "new"
    before = int(await async_client.hget(keys.data, "fence"))
    assert 0 < await async_client.pttl(keys.fence) <= 1300  # ttl + 2 lock_ttl + 1 s
    assert await wait_until(lambda: _gone(async_client, keys.fence), limit=10.0)
    assert await value() == "new"
    assert int(await async_client.hget(keys.data, "fence")) > before
    assert await _late_write(async_client, keys, before) == 0  # refused


async def test_twin_a_counter_restarted_by_incr_lets_a_paused_rebuild_overwrite(
    async_client: redis.asyncio.Redis,
) -> None:
    """Without arming, an expired counter restarts at 1 (the lock's INCR): the newer rebuild
    writes with fence 1, and a rebuild paused since the old counter overwrites it."""
    keys = cache.CacheKeys.build("redlease", b"cache:twin")
    old = 1_764_000_000_000_000  # a fence from the old counter
    assert await async_client.incr(keys.fence) == 1  # the new holder's fence
    assert await _late_write(async_client, keys, 1) == 1
    assert await _late_write(async_client, keys, old) == 1  # the late write is accepted


async def _gone(client: Any, key: bytes) -> bool:
    return bool(await client.exists(key) == 0)


async def _late_write(client: Any, keys: cache.CacheKeys, fence: int) -> int:
    reply = await client.eval(cache.WRITE.source, 2, *keys.all, fence, b'"x"', 10_000, 0, 10_000)
    return int(reply[0])


# -- a cluster ------------------------------------------------------------------------------
async def test_on_a_cluster(cluster: RedisClusterServers) -> None:
    conn = cluster.async_client()
    calls: list[str] = []
    try:

        @redlease.cached(conn, ttl=30, name="report")
        async def report(day: str) -> str:
            calls.append(day)
            return day.upper()

        for day in ("mon", "tue", "wed", "mon", "tue", "wed"):
            assert await report(day) == day.upper()
        assert calls == ["mon", "tue", "wed"]
        assert await report.invalidate("mon") is True
        assert await report("mon") == "MON"
        assert calls == ["mon", "tue", "wed", "mon"]
    finally:
        await redlease.close(conn)
        await conn.aclose()


async def test_an_outage_raises_unavailable_with_the_cause(make_server: Any) -> None:
    srv = make_server()
    conn = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=1.0)
    try:

        @redlease.cached(conn, ttl=30, name="report")
        async def report() -> int:
            return 1

        assert await report() == 1
        srv.stop()
        with pytest.raises(redlease.Unavailable) as caught:
            await report()
        assert isinstance(caught.value.__cause__, redis.exceptions.RedisError)
    finally:
        await redlease.close(conn)
        await conn.aclose()


async def test_lookups_are_counted_by_prometheus_and_opentelemetry(
    async_client: redis.asyncio.Redis,
) -> None:
    registry = prometheus_client.CollectorRegistry()
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])

    @redlease.cached(async_client, ttl=30, key="m:cached")
    async def value() -> int:
        return 1

    for observer in (PrometheusMetrics(registry), OpenTelemetryMetrics(provider)):
        previous = use(observer)
        try:
            await value.invalidate()
            assert await value() == 1
            assert await value() == 1
        finally:
            use(previous)
    for outcome in ("miss", "hit"):
        labels = {"name": "m:cached", "outcome": outcome}
        assert registry.get_sample_value("redlease_cache_lookups_total", labels) == 1
    data = reader.get_metrics_data()
    assert data is not None
    counted = {
        point.attributes["outcome"]: point.value
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "redlease.cache.lookups"
        for point in metric.data.data_points
    }
    assert counted == {"miss": 1, "hit": 1}
    provider.shutdown()
