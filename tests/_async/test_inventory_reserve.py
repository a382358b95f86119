"""Inventory against a real server: reserve, confirm, cancel, retries, per-user limits
(asyncio; tests/_sync/test_inventory_reserve.py is generated)."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from tests._async.helpers import wait_until
from tests._async.inventory_helpers import expired, keys, stocked
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)


# -- the basics -----------------------------------------------------------------------------
async def test_restock_reserve_confirm_cancel_and_snapshot(
    async_client: redis.asyncio.Redis,
) -> None:
    inv = redlease.Inventory(async_client, "sku:1001")
    assert await inv.snapshot() == redlease.Stock(available=0, reserved=0, sold=0, total=0)
    assert await inv.restock(100) == redlease.Stock(100, 0, 0, 100)
    assert await inv.restock(0) == redlease.Stock(100, 0, 0, 100)

    res = await inv.reserve(user="u1", qty=1, order_id="o-1", hold=300.0, per_user_limit=1)
    assert (res.order_id, res.user, res.qty, res.state, res.changed) == (
        "o-1",
        "u1",
        1,
        "reserved",
        True,
    )
    assert res.live
    assert await inv.snapshot() == redlease.Stock(99, 1, 0, 100)

    sold = await inv.confirm("o-1")
    assert (sold.state, sold.expires_at, sold.expires_in, sold.changed) == (
        "sold",
        None,
        None,
        True,
    )
    assert await inv.snapshot() == redlease.Stock(99, 0, 1, 100)

    await inv.reserve(user="u2", qty=3, order_id="o-2")
    assert await inv.snapshot() == redlease.Stock(96, 3, 1, 100)
    cancelled = await inv.cancel("o-2")
    assert (cancelled.state, cancelled.expires_at, cancelled.changed) == ("cancelled", None, True)
    assert await inv.snapshot() == redlease.Stock(99, 0, 1, 100)
    assert await inv.restock(5) == redlease.Stock(104, 0, 1, 105)


async def test_hold_deadline_is_server_time(async_client: redis.asyncio.Redis) -> None:
    inv = await stocked(async_client, 1)
    seconds, micros = await async_client.time()
    before = seconds + micros / 1e6
    res = await inv.reserve(user="u1", order_id="o-1", hold=30.0)
    seconds, micros = await async_client.time()
    after = seconds + micros / 1e6
    assert res.expires_at is not None and res.expires_in is not None
    assert before + 30.0 - 0.002 <= res.expires_at <= after + 30.0 + 0.002
    assert 29.0 < res.expires_in <= 30.0
    deadline = await async_client.zscore(keys("sku:1").holds, "o-1")
    assert deadline == round(res.expires_at * 1000)


async def test_order_lookup(async_client: redis.asyncio.Redis) -> None:
    inv = await stocked(async_client, 2)
    assert await inv.order("nope") is None
    res = await inv.reserve(user="u1", order_id="o-1", qty=2)
    assert await inv.order("o-1") == res
    await inv.confirm("o-1")
    looked = await inv.order("o-1")
    assert looked is not None and looked.state == "sold" and not looked.changed


# -- idempotency ----------------------------------------------------------------------------
async def test_retried_reserve_returns_the_same_reservation(
    async_client: redis.asyncio.Redis,
) -> None:
    inv = await stocked(async_client, 10)
    first = await inv.reserve(user="u1", order_id="o-1", qty=2, per_user_limit=2)
    again = await inv.reserve(user="u1", order_id="o-1", qty=2, per_user_limit=2)
    assert again == first
    assert first.changed and not again.changed
    # a known order id is answered before the limit and the stock are looked at
    await inv.reserve(user="u2", order_id="o-2", qty=8)
    assert (await inv.snapshot()).available == 0
    assert await inv.reserve(user="u1", order_id="o-1", qty=2, per_user_limit=1) == first
    assert await inv.snapshot() == redlease.Stock(0, 10, 0, 10)


async def test_concurrent_retries_take_one_item(async_client: redis.asyncio.Redis) -> None:
    inv = await stocked(async_client, 5)

    async def attempt() -> Any:
        return await inv.reserve(user="u1", order_id="o-1", qty=1)

    results = await AsyncTasks.gather(*[attempt] * 20)
    assert sum(r.changed for r in results) == 1
    assert len(set(results)) == 1
    assert await inv.snapshot() == redlease.Stock(4, 1, 0, 5)


@pytest.mark.parametrize("end", ["sold", "cancelled", "expired"])
async def test_a_closed_order_id_never_takes_a_second_item(
    async_client: redis.asyncio.Redis, end: str
) -> None:
    inv = await stocked(async_client, 3)
    await inv.reserve(user="u1", order_id="o-1", hold=0.2 if end == "expired" else 60.0)
    if end == "sold":
        await inv.confirm("o-1")
    elif end == "cancelled":
        await inv.cancel("o-1")
    else:
        assert await wait_until(lambda: expired(inv, "o-1"))
    for _ in range(3):
        again = await inv.reserve(user="u1", order_id="o-1")
        assert (again.state, again.changed) == (end, False)
    sold = 1 if end == "sold" else 0
    assert await inv.snapshot() == redlease.Stock(3 - sold, 0, sold, 3)


async def test_reusing_an_order_id_for_another_purchase_is_a_conflict(
    async_client: redis.asyncio.Redis,
) -> None:
    inv = await stocked(async_client, 5)
    first = await inv.reserve(user="u1", order_id="o-1", qty=2)
    for user, qty in (("u2", 2), ("u1", 1)):
        with pytest.raises(redlease.OrderConflict, match=r"'o-1'.*user 'u1', qty 2") as info:
            await inv.reserve(user=user, order_id="o-1", qty=qty)
        assert info.value.reservation == first
        assert (info.value.order_id, info.value.state) == ("o-1", "reserved")
        assert isinstance(info.value, redlease.InventoryError)
    assert await inv.snapshot() == redlease.Stock(3, 2, 0, 5)


# -- the per-user limit ---------------------------------------------------------------------
async def test_per_user_limit_counts_units_of_live_and_sold_orders(
    async_client: redis.asyncio.Redis,
) -> None:
    inv = await stocked(async_client, 10)
    await inv.reserve(user="u1", order_id="o-1", qty=2, per_user_limit=3)
    with pytest.raises(redlease.LimitExceeded) as info:
        await inv.reserve(user="u1", order_id="o-2", qty=2, per_user_limit=3)
    assert (info.value.limit, info.value.already, info.value.requested) == (3, 2, 2)
    assert "limit 3" in str(info.value) and "already has 2" in str(info.value)
    assert "2 requested" in str(info.value)
    assert isinstance(info.value, redlease.InventoryError)
    assert isinstance(info.value, redlease.RedleaseError)

    await inv.reserve(user="u1", order_id="o-3", qty=1, per_user_limit=3)
    await inv.confirm("o-1")  # sold units still count
    with pytest.raises(redlease.LimitExceeded) as info:
        await inv.reserve(user="u1", order_id="o-4", qty=1, per_user_limit=3)
    assert info.value.already == 3
    await inv.cancel("o-3")  # cancelled units do not
    await inv.reserve(user="u1", order_id="o-4", qty=1, per_user_limit=3)
    # other users, and calls without a limit, are not affected
    await inv.reserve(user="u2", order_id="o-5", qty=3, per_user_limit=3)
    await inv.reserve(user="u1", order_id="o-6", qty=1)
    assert await inv.snapshot() == redlease.Stock(3, 5, 2, 10)


async def test_expired_holds_do_not_count_against_the_limit(
    async_client: redis.asyncio.Redis,
) -> None:
    inv = await stocked(async_client, 5)
    await inv.reserve(user="u1", order_id="o-1", qty=2, hold=0.2, per_user_limit=2)
    with pytest.raises(redlease.LimitExceeded):
        await inv.reserve(user="u1", order_id="o-2", qty=1, hold=0.2, per_user_limit=2)
    assert await wait_until(lambda: expired(inv, "o-1"))
    res = await inv.reserve(user="u1", order_id="o-2", qty=2, per_user_limit=2)
    assert res.changed


async def test_limit_is_checked_before_stock(async_client: redis.asyncio.Redis) -> None:
    inv = await stocked(async_client, 1)
    await inv.reserve(user="u1", order_id="o-1")
    with pytest.raises(redlease.LimitExceeded):
        await inv.reserve(user="u1", order_id="o-2", per_user_limit=1)
    with pytest.raises(redlease.SoldOut):
        await inv.reserve(user="u1", order_id="o-2", per_user_limit=2)


async def test_odd_user_and_order_ids_are_kept_apart(async_client: redis.asyncio.Redis) -> None:
    inv = await stocked(async_client, 20)
    users = ["a", "1:a", "a|b", "a\x00", "ä", "a" * 20]
    for i, user in enumerate(users):
        await inv.reserve(user=user, order_id=f"{user}|{i}\x00", qty=2, per_user_limit=2)
    for i, user in enumerate(users):
        res = await inv.order(f"{user}|{i}\x00")
        assert res is not None and (res.user, res.qty) == (user, 2)
        with pytest.raises(redlease.LimitExceeded) as info:
            await inv.reserve(user=user, order_id=f"more-{i}", per_user_limit=2)
        assert info.value.already == 2
        await inv.cancel(f"{user}|{i}\x00")
    assert await inv.snapshot() == redlease.Stock(20, 0, 0, 20)


# -- stock ----------------------------------------------------------------------------------
async def test_sold_out_says_what_is_left(async_client: redis.asyncio.Redis) -> None:
    inv = await stocked(async_client, 3)
    await inv.reserve(user="u1", order_id="o-1", qty=2)
    with pytest.raises(redlease.SoldOut) as info:
        await inv.reserve(user="u2", order_id="o-2", qty=2)
    assert (info.value.available, info.value.requested) == (1, 2)
    assert "1 available, 2 requested" in str(info.value)
    assert info.value.name == "sku:1"
    assert await inv.order("o-2") is None  # a refused order id is not recorded
    assert (await inv.reserve(user="u2", order_id="o-2", qty=1)).changed


async def test_concurrent_buyers_never_oversell(async_client: redis.asyncio.Redis) -> None:
    inv = await stocked(async_client, 10)

    def buyer(i: int) -> Any:
        async def buy() -> bool:
            try:
                await inv.reserve(user=f"u{i}", order_id=f"o-{i}")
            except redlease.SoldOut:
                return False
            return True

        return buy

    results = await AsyncTasks.gather(*(buyer(i) for i in range(40)))
    assert sum(results) == 10
    assert await inv.snapshot() == redlease.Stock(0, 10, 0, 10)
