"""Run examples/cache_rebuild.py: under the lock the rebuild runs once, and its twin (no
lock) shows the stampede: several workers rebuild."""

from __future__ import annotations

from collections.abc import Iterator

import cache_rebuild
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


def test_the_lock_rebuilds_once(client: redis.Redis) -> None:
    assert cache_rebuild.scenario(client, name="locked") == 1


def test_twin_without_the_lock_several_rebuild(client: redis.Redis) -> None:
    # the workers start together on a barrier and the rebuild sleeps 100 ms: they overlap
    assert cache_rebuild.scenario(client, locked=False, name="stampede") > 1


def test_redlease_cached_rebuilds_once(client: redis.Redis) -> None:
    assert cache_rebuild.scenario_cached(client) == 1
