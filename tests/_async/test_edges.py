"""Edges of the public API: very long timeouts, names that break a hash tag, ... (asyncio;
tests/_sync/test_edges.py is generated)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio
from redis.crc import key_slot
from redis.exceptions import ClusterCrossSlotError, RedisClusterException

import redlease.asyncio as redlease
from redlease._core.inventory import InventoryKeys
from redlease._core.lock import LockKeys
from tests._async.helpers import wait_until
from tests.support import AsyncTasks
from tests.topology import RedisClusterServers

pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize("kind", ["lock", "redlock"])
@pytest.mark.parametrize("timeout", [1e10, 1e300])
async def test_a_very_long_timeout_is_a_valid_long_wait(
    async_client: redis.asyncio.Redis, kind: str, timeout: float
) -> None:
    """``acquire(timeout=1e10)`` raised OverflowError from threading (sync Lock and Redlock):
    it waits, uncontended and contended, as a long timeout should."""

    def make() -> redlease.Lock | redlease.Redlock:
        if kind == "lock":
            return redlease.Lock(async_client, "long", ttl=10.0)
        return redlease.Redlock([async_client], "long", ttl=10.0, allow_small_quorum=True)

    holder, waiter = make(), make()

    async def hold() -> None:
        assert await holder.acquire(timeout=timeout)  # uncontended
        assert await wait_until(lambda: _queued(async_client))
        await holder.release()

    async def wait() -> bool:
        assert await wait_until(holder.locked)
        got = await waiter.acquire(timeout=timeout)  # contended: waits, then gets it
        if got:
            await waiter.release()
        return got

    _, got = await AsyncTasks.gather(hold, wait)
    assert got is True


async def _queued(client: redis.asyncio.Redis) -> bool:
    return bool(await client.zcard(b"redlease:{long}:queue"))


@pytest.fixture
async def on_cluster(cluster: RedisClusterServers) -> AsyncIterator[Any]:
    conn = cluster.async_client()
    yield conn
    await redlease.close(conn)
    await conn.aclose()


async def test_a_name_starting_with_a_brace_is_a_bad_name_on_a_cluster(
    on_cluster: Any,
) -> None:
    """``{}x}`` is an empty hash tag: each key of ``}x`` falls in a slot of its own, and the
    cluster refuses the script (CROSSSLOT), which was raised as an outage (LockUnavailable).
    It is a ValueError naming ``name``, before anything is sent."""
    for use in (
        lambda: redlease.Lock(on_cluster, "}x").acquire(blocking=False),
        lambda: redlease.Semaphore(on_cluster, "}x", 1).acquire(blocking=False),
        lambda: redlease.FencedStore(on_cluster, "}x").read(),
        lambda: redlease.Lock(on_cluster, "}x").inspect(),
    ):
        with pytest.raises(ValueError, match=r"^name must not start with '\}'"):
            await use()
    # Braces further in keep one tag: "a}b" is tagged "a", "{y}" is tagged "{y".
    for name in ("a}b", "{y}", "x{"):
        lock = redlease.Lock(on_cluster, name, ttl=5.0)
        assert await lock.acquire(blocking=False)
        await lock.release()


async def test_twin_the_keys_of_such_a_name_are_refused_by_the_cluster(
    on_cluster: Any,
) -> None:
    """The twin: the lock's keys sent as they are do not hash to one slot, so the check
    above is what turns the cluster's refusal into a clear error."""
    keys = LockKeys.build("redlease", b"}x").in_order()
    assert len({key_slot(key) for key in keys}) > 1
    with pytest.raises((RedisClusterException, ClusterCrossSlotError), match=r"same (key )?slot"):
        await on_cluster.eval("return 1", len(keys), *keys)


async def test_the_same_name_works_on_one_server(async_client: redis.asyncio.Redis) -> None:
    """One server has no slots: such a name keeps working there (no key of it changed)."""
    lock = redlease.Lock(async_client, "}x", ttl=5.0)
    assert await lock.acquire(blocking=False)
    assert await async_client.exists(b"redlease:{}x}:lock") == 1
    await lock.release()


async def test_an_inventory_total_stops_at_2_53_minus_1(
    async_client: redis.asyncio.Redis,
) -> None:
    """Lua counts in doubles: exact up to 2**53. A restock that would pass 2**53 - 1 (here
    after the many restocks a hash set by hand stands for) is refused, adding nothing."""
    stock = redlease.Inventory(async_client, "sku:big")
    key = InventoryKeys.build("redlease", b"sku:big").stock
    near = 2**53 - 10
    await async_client.hset(
        key, mapping={"available": near, "reserved": 0, "sold": 0, "total": near}
    )
    assert (await stock.restock(9)).total == 2**53 - 1  # up to the limit: exact
    with pytest.raises(ValueError, match=r"^qty 1 would take the total .* past 9007199254740991"):
        await stock.restock(1)
    after = await stock.snapshot()
    assert (after.available, after.total) == (2**53 - 1, 2**53 - 1)  # nothing was added
    assert (await stock.reserve(user="u", order_id="o1", qty=3)).qty == 3
    assert (await stock.snapshot()).available == 2**53 - 4  # still counted exactly


async def test_twin_past_2_53_the_counts_are_wrong(async_client: redis.asyncio.Redis) -> None:
    """The twin: a total above 2**53 (what repeated restocks reached before) reads back
    rounded: one unit is lost in the count."""
    stock = redlease.Inventory(async_client, "sku:huge")
    key = InventoryKeys.build("redlease", b"sku:huge").stock
    over = 2**53 + 1
    await async_client.hset(
        key, mapping={"available": over, "reserved": 0, "sold": 0, "total": over}
    )
    seen = await stock.snapshot()
    assert seen.total != over and seen.total == 2**53
