"""valkey-py's ``ValkeyCluster`` is accepted like redis-py's ``RedisCluster``.

The same Cluster adapter (``_async/cluster.py``) runs with valkey-py's classes (its node
settings, pools and pub/sub) and translates its errors into redis-py's. A few tests on the
session's cluster: scripts on several masters, a waiter woken by SPUBLISH on the slot's
master (valkey-py's asyncio PubSub has no ``ssubscribe()``: the adapter sends SSUBSCRIBE
itself), renewals, an Inventory, and Redlock's refusal. The whole cluster suite runs with
redis-py (``test_*_cluster.py``); running it all again here would cost a minute per module.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

import redlease.asyncio as redlease
from redlease._async.cluster import AsyncClusterBackend
from redlease._async.runtime import runtime_for
from redlease._core.lock import LockKeys
from tests._async.helpers import wait_until
from tests.support import AsyncTasks
from tests.topology import RedisClusterServers

valkey_asyncio_cluster = pytest.importorskip("valkey.asyncio.cluster")

NAMES = ["vk-a", "vk-b", "vk-c", "vk-d"]


@pytest.fixture
async def vk_cluster(cluster: RedisClusterServers) -> AsyncIterator[Any]:
    node = cluster.masters[0]
    conn = valkey_asyncio_cluster.ValkeyCluster(host=node.host, port=node.port)
    yield conn
    await redlease.close(conn)
    await conn.aclose()


async def test_locks_on_several_masters_with_fences_and_inspect(
    vk_cluster: Any, cluster: RedisClusterServers
) -> None:
    assert len({cluster.master_of("{" + name + "}").port for name in NAMES}) > 1
    assert isinstance(runtime_for(vk_cluster).backend, AsyncClusterBackend)
    for name in NAMES:
        lock = redlease.Lock(vk_cluster, name, ttl=10.0)
        async with lock as held:
            assert held.fence > 0
            info = await lock.inspect()
            assert info.held and info.fence == held.fence
        assert not await lock.locked()
        with cluster.master_of("{" + name + "}").client() as conn:  # on the slot's master
            fence = conn.get(LockKeys.build("redlease", name.encode()).fence)
            assert fence == str(held.fence).encode()


async def test_a_waiter_is_woken_by_the_release(vk_cluster: Any) -> None:
    """The holder keeps a 30 s lease: the waiter gets the lock well before that only if the
    release's SPUBLISH reached its SSUBSCRIBE."""
    holder = redlease.Lock(vk_cluster, "vk-wait", ttl=30.0)
    waiter = redlease.Lock(vk_cluster, "vk-wait", ttl=30.0)
    queue = LockKeys.build("redlease", b"vk-wait").queue
    fences: dict[str, int] = {}

    async def wait() -> float:
        assert await wait_until(holder.locked)
        assert await waiter.acquire(timeout=25.0)
        got = time.monotonic()
        fences["waiter"] = waiter.fence or 0
        await waiter.release()
        return got

    async def hold_then_release() -> float:  # a lock is its task's (thread's): one task
        async def queued() -> bool:
            return int(await vk_cluster.zcard(queue)) == 1

        assert await holder.acquire()
        fences["holder"] = holder.fence or 0
        assert await wait_until(queued)
        await AsyncTasks.sleep(0.2)  # subscribed by now (generous; it is checked below)
        released = time.monotonic()
        await holder.release()
        return released

    got, released = await AsyncTasks.gather(wait, hold_then_release)
    assert got - released < 10.0  # woken, not the lease running out (30 s)
    assert fences["waiter"] > fences["holder"] > 0


async def test_leases_are_renewed_by_the_watchdog(vk_cluster: Any) -> None:
    locks = [redlease.Lock(vk_cluster, name, ttl=2.0) for name in NAMES]
    for lock in locks:
        assert await lock.acquire(blocking=False)
    await AsyncTasks.sleep(3.0)  # 1.5 leases: each renewed (generous on a loaded machine)
    for lock in locks:
        assert await lock.owned()
        await lock.release()


async def test_an_inventory_on_the_valkey_cluster(vk_cluster: Any) -> None:
    stock = redlease.Inventory(vk_cluster, "vk-sku")
    await stock.restock(2)
    await stock.reserve(user="u1", order_id="o1")
    await stock.reserve(user="u2", order_id="o2")
    with pytest.raises(redlease.SoldOut):
        await stock.reserve(user="u3", order_id="o3")
    await stock.confirm("o1")
    await stock.cancel("o2")
    assert (await stock.snapshot()).available == 1


async def test_redlock_refuses_a_valkey_cluster_client(vk_cluster: Any) -> None:
    with pytest.raises(TypeError, match="not of a Redis Cluster"):
        redlease.Redlock([vk_cluster, vk_cluster, vk_cluster], "x")
