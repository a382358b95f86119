"""Inventory retention of settled order ids, against a real server
(asyncio; tests/_sync/test_inventory_retention.py is generated)."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._core import inventory as inventory_core
from redlease._core.inventory import SWEEP
from redlease._core.scripts import Script
from tests._async.helpers import wait_until
from tests._async.inventory_helpers import keys, stocked

pytestmark = pytest.mark.timeout(60)


# -- retention of settled order ids -----------------------------------------------------------
async def retention_problems(client: redis.asyncio.Redis) -> list[str]:
    """A retry within the retention must find its order and take nothing more."""
    inv = redlease.Inventory(client, "sku:1", retention=60.0)
    await inv.restock(2)
    await inv.reserve(user="u1", order_id="o-1")
    await inv.confirm("o-1")
    retry = await inv.reserve(user="u1", order_id="o-1")
    problems = []
    if retry.changed or retry.state != "sold":
        problems.append(f"the retry was not recognised: {retry}")
    if (stock := await inv.snapshot()) != redlease.Stock(1, 0, 1, 2):
        problems.append(f"the retry took units: {stock}")
    return problems


async def test_retention_keeps_order_ids_for_that_long(async_client: redis.asyncio.Redis) -> None:
    assert await retention_problems(async_client) == []
    forget_at = await async_client.zscore(keys("sku:1").settled, "o-1")
    seconds, micros = await async_client.time()
    assert (
        forget_at is not None and 50_000 < forget_at - (seconds * 1000 + micros // 1000) <= 60_000
    )


async def test_retention_twin_that_forgets_at_once_is_caught(
    async_client: redis.asyncio.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same check, with scripts that forget settled orders before their time, fails."""
    bound = "redis.call('ZRANGEBYSCORE', K.settled, '-inf', now,"
    for name in ("RESERVE", "CONFIRM"):
        script = getattr(inventory_core, name)
        assert bound in script.source
        source = script.source.replace(
            bound, "redis.call('ZRANGEBYSCORE', K.settled, '-inf', '+inf',"
        )
        twin = Script(script.name, source, hashlib.sha1(source.encode()).hexdigest())
        monkeypatch.setattr(inventory_core, name, twin)
    problems = await retention_problems(async_client)
    assert any("the retry was not recognised" in p for p in problems)
    assert any("the retry took units" in p for p in problems)


async def test_retention_forgets_settled_orders_after_it_a_bounded_number_per_call(
    async_client: redis.asyncio.Redis,
) -> None:
    # The retention must outlast the set-up's 211 calls, also on a loaded machine (with 1 s,
    # a loaded cluster run forgot the first orders before the count below).
    inv = redlease.Inventory(async_client, "sku:1", retention=3.0)
    await inv.restock(SWEEP + 10)
    for i in range(SWEEP + 5):
        await inv.reserve(user=f"u{i}", order_id=f"c-{i}")
        await inv.cancel(f"c-{i}")
    await inv.reserve(user="u1", order_id="sold")
    await inv.confirm("sold")
    await inv.reserve(user="u2", order_id="live", hold=300.0)
    k = keys("sku:1")
    assert await async_client.zcard(k.settled) == SWEEP + 6
    assert (await inv.reserve(user="u0", order_id="c-0")).state == "cancelled"  # still known
    last = await async_client.zscore(k.settled, "sold")
    assert last is not None

    async def due() -> bool:
        s, m = await async_client.time()
        return s * 1000 + m // 1000 >= last

    assert await wait_until(due)
    await inv.restock(0)  # one writing call forgets SWEEP of them, oldest first
    assert await async_client.zcard(k.settled) == 6
    assert await async_client.hlen(k.orders) == 7  # 5 cancelled, sold, live
    await inv.restock(0)
    assert await async_client.exists(k.settled) == 0
    assert set(await async_client.hkeys(k.orders)) == {b"live"}  # the live hold stays
    assert await inv.order("sold") is None and await inv.order("c-0") is None
    assert await inv.snapshot() == redlease.Stock(SWEEP + 8, 1, 1, SWEEP + 10)
    assert await async_client.hget(k.users, "u1") == b"1"  # sold units still count
    again = await inv.reserve(user="u0", order_id="c-0")  # a forgotten id: a new purchase
    assert again.changed and again.state == "reserved"


async def test_without_retention_order_ids_are_kept(async_client: redis.asyncio.Redis) -> None:
    inv = await stocked(async_client, 1)
    await inv.reserve(user="u1", order_id="o-1")
    await inv.cancel("o-1")
    assert await async_client.exists(keys("sku:1").settled) == 0
    assert (await inv.reserve(user="u1", order_id="o-1")).state == "cancelled"


@pytest.mark.parametrize(
    ("retention", "error"),
    [
        (0, ValueError),
        (0.5, ValueError),
        (-1, ValueError),
        (math.nan, ValueError),
        (math.inf, ValueError),
        (400 * 86400, ValueError),
        ("60", TypeError),
        (True, TypeError),
    ],
)
async def test_bad_retention_is_refused(
    async_client: redis.asyncio.Redis, retention: Any, error: type
) -> None:
    with pytest.raises(error, match=r"^retention "):
        redlease.Inventory(async_client, "sku:1", retention=retention)
