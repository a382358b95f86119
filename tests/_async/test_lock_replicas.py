"""``wait_replicas`` / ``wait_timeout`` / ``wait_aof``: WAIT (WAITAOF) after the acquire script.

On the Sentinel fixture's master (2 replicas), on a lone server (no replica) and on a server
with an AOF. The failover tests (an acknowledged lease survives, an unacknowledged one may
not) are in ``tests/test_cluster_faults.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from tests._async.lock_helpers import keys
from tests.support import needs_server
from tests.topology import SentinelGroup

pytestmark = pytest.mark.timeout(60)


async def test_two_replicas_acknowledge_the_lock(sentinel_group: SentinelGroup) -> None:
    client = sentinel_group.async_master_for()
    lock = redlease.Lock(client, "acked", wait_replicas=2, wait_timeout=5)
    assert await lock.acquire()
    for replica in sentinel_group.replicas:
        with replica.client() as conn:
            assert conn.get(keys("acked").lock) is not None  # it is there, as promised
    await lock.release()
    await client.aclose()


async def test_a_frozen_replica_makes_the_acquire_fail_and_release(
    sentinel_group: SentinelGroup,
) -> None:
    client = sentinel_group.async_master_for()
    frozen = sentinel_group.replicas[0]
    lock = redlease.Lock(client, "short", wait_replicas=2, wait_timeout=0.2)
    frozen.pause()
    try:
        with pytest.raises(redlease.ReplicasUnavailable, match="only 1 of 2") as caught:
            await lock.acquire(timeout=0)
    finally:
        frozen.resume()
    assert (caught.value.acknowledged, caught.value.wanted) == (1, 2)
    assert lock.fence is None and not await lock.locked()  # released again, not held
    # The twin: without wait_replicas the same acquire succeeds (and nobody knows about the
    # replica that never saw it).
    frozen.pause()
    try:
        plain = redlease.Lock(client, "short")
        assert await plain.acquire(timeout=0)
        await plain.release()
    finally:
        frozen.resume()
    await client.aclose()


async def test_no_replica_no_lock(async_client: redis.asyncio.Redis) -> None:
    lock = redlease.Lock(async_client, "alone", wait_replicas=1, wait_timeout=0.05)
    with pytest.raises(redlease.ReplicasUnavailable, match="only 0 of 1 replica"):
        await lock.acquire()
    assert not await lock.locked()
    assert await async_client.exists(keys("alone").lock) == 0
    waiter_free = redlease.Lock(async_client, "alone")
    assert await waiter_free.acquire(timeout=0)  # nothing left behind
    await waiter_free.release()


async def test_wait_aof_without_an_aof_is_a_clear_error_not_a_downgrade(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = redlease.Lock(async_client, "aof", wait_aof=True, wait_timeout=0.1)
    with pytest.raises(redlease.LockUnavailable, match="WAITAOF") as caught:
        await lock.acquire()
    assert not isinstance(caught.value, redlease.ReplicasUnavailable)
    assert not await lock.locked()


@needs_server((7, 2), "WAITAOF")
async def test_wait_aof_on_a_server_with_an_aof(make_server: Any) -> None:
    srv = make_server(config={"appendonly": "yes", "appendfsync": "always"})
    client = redis.asyncio.Redis(host=srv.host, port=srv.port)
    lock = redlease.Lock(client, "aof", wait_aof=True, wait_timeout=2)
    assert await lock.acquire()  # fsynced by the master; 0 replicas asked for
    await lock.release()
    short = redlease.Lock(client, "aof", wait_aof=True, wait_replicas=1, wait_timeout=0.05)
    with pytest.raises(redlease.ReplicasUnavailable, match="fsynced by the master: True"):
        await short.acquire()
    await client.aclose()


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"wait_replicas": -1}, ValueError, "wait_replicas must be >= 0"),
        ({"wait_replicas": 1.0}, TypeError, "wait_replicas must be an int"),
        ({"wait_replicas": True}, TypeError, "wait_replicas must be an int"),
        ({"wait_timeout": 0}, ValueError, "wait_timeout must be > 0"),
        ({"wait_timeout": 61}, ValueError, "wait_timeout must be > 0 and at most 60"),
        ({"wait_aof": 1}, TypeError, "wait_aof must be a bool"),
    ],
)
async def test_bad_wait_arguments(
    async_client: redis.asyncio.Redis, kwargs: dict[str, Any], error: type, message: str
) -> None:
    with pytest.raises(error, match=message):
        redlease.Lock(async_client, "x", **kwargs)
