"""On a cluster, one SSUBSCRIBE connection per master carries the channels of every lock this
client waits on there: not one connection per waited lock (Redisson #3577, #4216: one
subscription per lock exhausts connections). ``benchmarks/cluster_subscriptions.py`` measures
50 waiters on 50 locks; this is the cheap version, with the connections counted by the
masters themselves (CLIENT LIST). 0 commands/s per blocked waiter: test_lock_cluster.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import redlease.asyncio as redlease
from tests._async.helpers import wait_until
from tests.support import AsyncTasks
from tests.topology import RedisClusterServers

pytestmark = pytest.mark.timeout(60)

N = 12


@pytest.fixture
async def rc(cluster: RedisClusterServers) -> AsyncIterator[Any]:
    conn = cluster.async_client()
    yield conn
    await redlease.close(conn)
    await conn.aclose()


def subscriptions(cluster: RedisClusterServers) -> dict[int, list[int]]:
    """Per master port: the ``ssub`` count of each connection with sharded subscriptions."""
    found: dict[int, list[int]] = {}
    for srv in cluster.masters:
        with srv.client() as conn:
            found[srv.port] = [
                int(c["ssub"]) for c in conn.client_list() if int(c.get("ssub", 0) or 0) > 0
            ]
    return found


async def test_waiters_on_many_locks_share_one_connection_per_master(
    rc: Any, cluster: RedisClusterServers
) -> None:
    names = [f"many-waited:{i}" for i in range(N)]
    per_master: dict[int, int] = {}
    for name in names:
        port = cluster.master_of("{" + name + "}").port
        per_master[port] = per_master.get(port, 0) + 1
    assert len(per_master) > 1  # the locks are spread over several masters
    holders = [redlease.Lock(rc, name, ttl=30.0) for name in names]
    seen: list[dict[int, list[int]]] = []
    held: list[bool] = []

    async def all_held() -> bool:
        return bool(held)

    async def all_subscribed() -> bool:
        found = await AsyncTasks.blocking(lambda: subscriptions(cluster))
        seen[:] = [found]
        return sum(sum(counts) for counts in found.values()) == N

    async def hold() -> None:  # a lock is its task's (thread's): one task holds them all
        for lock in holders:
            assert await lock.acquire(blocking=False)
        held.append(True)
        try:
            assert await wait_until(all_subscribed, limit=20.0), seen
        finally:
            for lock in holders:
                await lock.release()

    def waiter(name: str) -> Any:
        async def wait() -> bool:
            assert await wait_until(all_held)
            lock = redlease.Lock(rc, name, ttl=30.0)
            got = await lock.acquire(timeout=30.0)
            if got:
                await lock.release()
            return got

        return wait

    results = await AsyncTasks.gather(hold, *(waiter(name) for name in names))
    assert results[1:] == [True] * N
    (found,) = seen
    for port, count in per_master.items():
        assert found[port] == [count]  # one connection, carrying that master's N channels
