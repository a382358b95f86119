"""Metrics through the one observer hook, exported with a real ``prometheus_client`` registry
and an OpenTelemetry SDK in-memory reader (asyncio; the sync twin is generated)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import prometheus_client
import pytest
import redis.asyncio
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import redlease.asyncio as redlease
from redlease import metrics
from redlease._core.lock import LockKeys
from tests._async.helpers import wait_until
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)


def keys(name: str) -> LockKeys:
    return LockKeys.build("redlease", name.encode())


@pytest.fixture
def registry() -> Iterator[prometheus_client.CollectorRegistry]:
    """A fresh registry with PrometheusMetrics installed for the test, removed after it."""
    registry = prometheus_client.CollectorRegistry()
    previous = metrics.use(metrics.PrometheusMetrics(registry))
    yield registry
    metrics.use(previous)


def sample(registry: prometheus_client.CollectorRegistry, metric: str, labels: Any) -> float:
    return registry.get_sample_value(metric, labels) or 0.0


def of(name: str, **more: str) -> dict[str, str]:
    return {"primitive": "lock", "name": name, **more}


async def test_acquire_wait_hold_and_contention(
    async_client: redis.asyncio.Redis, registry: prometheus_client.CollectorRegistry
) -> None:
    lock = redlease.Lock(async_client, "m:basic")
    async with lock:
        await AsyncTasks.sleep(0.1)
        other = redlease.Lock(async_client, "m:basic")
        assert await AsyncTasks.run(lambda: other.acquire(blocking=False)) is False
    acquired = of("m:basic", outcome="acquired")
    assert sample(registry, "redlease_acquire_wait_seconds_count", acquired) == 1
    busy = of("m:basic", outcome="not_acquired")
    assert sample(registry, "redlease_acquire_wait_seconds_count", busy) == 1
    assert sample(registry, "redlease_hold_seconds_count", of("m:basic")) == 1
    assert sample(registry, "redlease_hold_seconds_sum", of("m:basic")) >= 0.1
    assert sample(registry, "redlease_waiters", of("m:basic")) == 0


async def test_the_waiters_gauge_counts_a_blocked_acquire(
    async_client: redis.asyncio.Redis, registry: prometheus_client.CollectorRegistry
) -> None:
    holder = redlease.Lock(async_client, "m:waiting")
    waiter = redlease.Lock(async_client, "m:waiting")

    async def one_waiting() -> bool:
        return sample(registry, "redlease_waiters", of("m:waiting")) == 1

    async def hold() -> None:
        assert await holder.acquire()
        assert await wait_until(one_waiting)
        await holder.release()

    async def wait() -> None:
        assert await wait_until(holder.locked)
        assert await waiter.acquire(timeout=10)
        await waiter.release()

    await AsyncTasks.gather(hold, wait)
    assert sample(registry, "redlease_waiters", of("m:waiting")) == 0
    acquired = of("m:waiting", outcome="acquired")
    assert sample(registry, "redlease_acquire_wait_seconds_count", acquired) == 2


async def test_renewals_and_a_lost_lease(
    async_client: redis.asyncio.Redis, registry: prometheus_client.CollectorRegistry
) -> None:
    lock = redlease.Lock(async_client, "m:renewed", ttl=1.2)  # renewed every 0.4 s
    assert await lock.acquire()

    async def renewed() -> bool:
        renewals = sample(registry, "redlease_renewals_total", of("m:renewed", outcome="renewed"))
        return renewals >= 2

    assert await wait_until(renewed)
    await async_client.delete(keys("m:renewed").lock)

    async def lost() -> bool:
        return sample(registry, "redlease_leases_lost_total", of("m:renewed")) == 1

    assert await wait_until(lost)
    with pytest.raises(redlease.LockLost):
        await lock.release()
    assert sample(registry, "redlease_leases_lost_total", of("m:renewed")) == 1  # once
    assert sample(registry, "redlease_hold_seconds_count", of("m:renewed")) == 0


async def test_errors_by_operation(
    make_server: Any, registry: prometheus_client.CollectorRegistry
) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=0.5)
    srv.stop()
    with pytest.raises(redlease.LockUnavailable):
        await redlease.Lock(client, "m:down").acquire()
    assert sample(registry, "redlease_errors_total", of("m:down", operation="acquire")) == 1
    assert sample(registry, "redlease_waiters", of("m:down")) == 0
    await redlease.close(client)
    await client.aclose()


async def test_names_past_the_bound_are_other(async_client: redis.asyncio.Redis) -> None:
    registry = prometheus_client.CollectorRegistry()
    previous = metrics.use(metrics.PrometheusMetrics(registry, max_names=2))
    try:
        for name in ("m:a", "m:b", "m:c", "m:d", "m:a"):
            async with redlease.Lock(async_client, name):
                pass
    finally:
        metrics.use(previous)
    assert sample(registry, "redlease_hold_seconds_count", of("m:a")) == 2
    assert sample(registry, "redlease_hold_seconds_count", of("m:b")) == 1
    assert sample(registry, "redlease_hold_seconds_count", of("other")) == 2
    assert sample(registry, "redlease_hold_seconds_count", of("m:c")) == 0


async def test_nothing_is_recorded_without_an_observer(async_client: redis.asyncio.Redis) -> None:
    """The twin: the same registry, not installed, stays empty: the counts above come from
    the hook."""
    registry = prometheus_client.CollectorRegistry()
    metrics.PrometheusMetrics(registry)
    assert metrics.current() is None
    async with redlease.Lock(async_client, "m:off"):
        pass
    assert sample(registry, "redlease_hold_seconds_count", of("m:off")) == 0


def points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    """One collection, by instrument name: opentelemetry-sdk 1.20 reports an unchanged
    cumulative point only in the first collection after it changed."""
    data = reader.get_metrics_data()
    found: dict[str, list[Any]] = {}
    for resource in data.resource_metrics if data is not None else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


async def test_opentelemetry_instruments(async_client: redis.asyncio.Redis) -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    previous = metrics.use(metrics.OpenTelemetryMetrics(provider))
    try:
        async with redlease.Lock(async_client, "m:otel"):
            await AsyncTasks.sleep(0.05)
    finally:
        metrics.use(previous)
    collected = points(reader)
    [wait] = collected["redlease.acquire.wait"]
    assert dict(wait.attributes) == of("m:otel", outcome="acquired")
    assert wait.count == 1
    [hold] = collected["redlease.hold"]
    assert hold.count == 1 and hold.sum >= 0.05
    [waiters] = collected["redlease.waiters"]
    assert waiters.value == 0
    provider.shutdown()


class Broken(metrics.Observer):
    def acquired(self, primitive: str, name: str, waited: float) -> None:
        raise RuntimeError("exporter down")


async def test_an_observer_that_raises_is_logged_once_and_ignored(
    async_client: redis.asyncio.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    previous = metrics.use(Broken())
    try:
        for _ in range(3):
            async with redlease.Lock(async_client, "m:broken") as held:
                assert held.fence >= 1
    finally:
        metrics.use(previous)
    failed = [r for r in caplog.records if getattr(r, "redlease_event", "") == "observer_failed"]
    assert len(failed) == 1 and failed[0].levelno == logging.ERROR


async def test_an_observer_installed_again_is_logged_again(
    async_client: redis.asyncio.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """Each install logs its observer's first failure: a new observer may reuse the id of
    one that failed before (the reason a failure was logged nowhere in one CI run)."""
    broken = Broken()
    previous = metrics.use(broken)
    try:
        for _ in range(2):
            metrics.use(broken)
            async with redlease.Lock(async_client, "m:again"):
                pass
    finally:
        metrics.use(previous)
    failed = [r for r in caplog.records if getattr(r, "redlease_event", "") == "observer_failed"]
    assert len(failed) == 2


def test_use_checks_its_argument() -> None:
    with pytest.raises(TypeError, match="observer must be"):
        metrics.use(object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_names"):
        metrics.PrometheusMetrics(prometheus_client.CollectorRegistry(), max_names=-1)


def test_prometheus_metrics_twice_on_one_registry_share_the_metrics() -> None:
    """use(PrometheusMetrics(registry)) run twice (a reload, a second app) does not raise
    prometheus-client's "Duplicated timeseries": the second records into the first's metrics."""
    registry = prometheus_client.CollectorRegistry()
    first = metrics.PrometheusMetrics(registry)
    second = metrics.PrometheusMetrics(registry)
    second.lost("lock", "twice")
    first.lost("lock", "twice")
    assert sample(registry, "redlease_leases_lost_total", of("twice")) == 2
    other = metrics.PrometheusMetrics(registry, namespace="other")  # a second set, apart
    other.lost("lock", "twice")
    assert sample(registry, "other_leases_lost_total", of("twice")) == 1
    with pytest.raises(ValueError, match="other buckets or max_names"):
        metrics.PrometheusMetrics(registry, buckets=(1.0, 2.0))


def test_prometheus_metrics_on_names_taken_by_others_say_so() -> None:
    registry = prometheus_client.CollectorRegistry()
    prometheus_client.Counter("redlease_errors", "not ours", registry=registry)
    with pytest.raises(ValueError, match="metrics named like redlease's") as caught:
        metrics.PrometheusMetrics(registry)
    assert "Duplicated timeseries" in str(caught.value)
    # what it had registered before the clash is gone again: another namespace still works
    assert registry.get_sample_value("redlease_leases_lost_total", of("x")) is None
    metrics.PrometheusMetrics(registry, namespace="mine").lost("lock", "x")
