"""Run examples/cap_concurrency.py: the semaphore keeps the peak at the permits, and its twin
(no semaphore) shows the peak going above them."""

from __future__ import annotations

from collections.abc import Iterator

import cap_concurrency
import pytest
import redis

from redlease.server import RedisServer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def client() -> Iterator[redis.Redis]:
    with RedisServer() as server:
        conn = server.client()
        yield conn
        conn.close()


def test_the_semaphore_caps_the_peak(client: redis.Redis) -> None:
    assert 1 <= cap_concurrency.scenario(client, permits=2, name="capped") <= 2


def test_twin_without_the_semaphore_the_peak_goes_above(client: redis.Redis) -> None:
    # the workers start together on a barrier and each call sleeps 50 ms: they overlap
    assert cap_concurrency.scenario(client, permits=2, capped=False, name="uncapped") > 2
