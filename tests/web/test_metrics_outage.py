"""The outage decisions of the web rate limits, as the two metrics exporters count them."""

from __future__ import annotations

from typing import Any

import prometheus_client
import redis.asyncio
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from redis.backoff import NoBackoff
from redis.retry import Retry

import redlease.metrics as metrics
from tests.web.test_asgi import get, starlette_app


async def test_prometheus_and_opentelemetry_count_each_decision(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, retry=Retry(NoBackoff(), 0))
    srv.stop()
    registry = prometheus_client.CollectorRegistry()
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    try:
        for observer in (
            metrics.PrometheusMetrics(registry),
            metrics.OpenTelemetryMetrics(provider),
        ):
            previous = metrics.use(observer)
            try:
                assert (
                    await get(starlette_app(client, rate="1/second", on_unavailable="deny"))
                ).status_code == 503
                allow = starlette_app(client, rate="1/second", on_unavailable="allow", name="o")
                assert [(await get(allow)).status_code for _ in range(2)] == [200, 200]
            finally:
                metrics.use(previous)
    finally:
        await client.aclose()
    name = "redlease_ratelimit_unavailable_total"
    assert registry.get_sample_value(name, {"name": "http", "decision": "deny"}) == 1
    assert registry.get_sample_value(name, {"name": "o", "decision": "allow"}) == 2
    data = reader.get_metrics_data()
    assert data is not None
    counted = {
        (point.attributes["name"], point.attributes["decision"]): point.value
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "redlease.ratelimit.unavailable"
        for point in metric.data.data_points
    }
    assert counted == {("http", "deny"): 1, ("o", "allow"): 2}
    provider.shutdown()
