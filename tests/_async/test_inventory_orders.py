"""Inventory orders: holds that expire, confirm and cancel in every state, their keys
(asyncio; tests/_sync/test_inventory_orders.py is generated)."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._core.inventory import SWEEP, TRANSITIONS
from tests._async.helpers import wait_until
from tests._async.inventory_helpers import expired, keys, raw_stock, stocked

pytestmark = pytest.mark.timeout(60)


# -- expiry ---------------------------------------------------------------------------------
async def test_expired_holds_return_to_stock(async_client: redis.asyncio.Redis) -> None:
    inv = await stocked(async_client, 3)
    res = await inv.reserve(user="u1", order_id="o-1", qty=2, hold=0.2)
    assert await inv.snapshot() == redlease.Stock(1, 2, 0, 3)

    async def back() -> bool:
        return (await inv.snapshot()).available == 3

    assert await wait_until(back)
    # snapshot and order are read-only: nothing was settled in Redis yet
    assert await raw_stock(async_client) == {"available": 1, "reserved": 2, "total": 3}
    gone = await inv.order("o-1")
    assert gone is not None and gone.state == "expired" and gone.expires_at == res.expires_at
    # the next write settles it
    await inv.reserve(user="u2", order_id="o-2", qty=3)
    assert await raw_stock(async_client) == {"available": 0, "reserved": 3, "total": 3}
    assert await async_client.zscore(keys("sku:1").holds, "o-1") is None


async def test_confirm_after_the_deadline_is_refused_and_returns_the_units(
    async_client: redis.asyncio.Redis,
) -> None:
    inv = await stocked(async_client, 1)
    await inv.reserve(user="u1", order_id="o-1", hold=0.2)
    assert await wait_until(lambda: expired(inv, "o-1"))
    with pytest.raises(redlease.OrderClosed, match=r"'o-1'.*expired") as info:
        await inv.confirm("o-1")
    assert info.value.state == "expired"
    assert await inv.snapshot() == redlease.Stock(1, 0, 0, 1)
    assert await raw_stock(async_client) == {"available": 1, "reserved": 0, "total": 1}


async def create_expired_holds(inv: Any, count: int, user: str | None) -> None:
    """``count`` holds of one unit (of ``user``, or each of its own user), all expired."""
    for i in range(count):
        await inv.reserve(user=user or f"u{i}", order_id=f"bulk-{i}", hold=1.0)
    assert await wait_until(lambda: expired(inv, f"bulk-{count - 1}"))


async def test_a_refusal_first_settles_every_expired_hold_it_needs(
    async_client: redis.asyncio.Redis,
) -> None:
    """More holds expired than one call sweeps: reserve still sees all the stock."""
    count = SWEEP + 50
    inv = await stocked(async_client, count)
    await create_expired_holds(inv, count, None)
    assert await async_client.zcard(keys("sku:1").holds) == count  # none settled yet
    assert (await inv.snapshot()).available == count
    res = await inv.reserve(user="big", order_id="all", qty=count)
    assert res.changed
    assert await inv.snapshot() == redlease.Stock(0, count, 0, count)


async def test_a_limit_refusal_first_settles_the_users_expired_holds(
    async_client: redis.asyncio.Redis,
) -> None:
    count = SWEEP + 20
    inv = await stocked(async_client, count + 1)
    await create_expired_holds(inv, count, "u1")
    res = await inv.reserve(user="u1", order_id="one-more", per_user_limit=1)
    assert res.changed
    assert await async_client.hget(keys("sku:1").users, "u1") == b"1"


# -- confirm and cancel in every state ------------------------------------------------------
async def order_in_state(inv: Any, state: str) -> str:
    order_id = f"o-{state}"
    await inv.reserve(user="u1", order_id=order_id, hold=0.2 if state == "expired" else 60.0)
    if state == "sold":
        await inv.confirm(order_id)
    elif state == "cancelled":
        await inv.cancel(order_id)
    elif state == "expired":
        assert await wait_until(lambda: expired(inv, order_id))
    return order_id


@pytest.mark.parametrize(
    ("action", "state"),
    [(action, state) for action, table in TRANSITIONS.items() for state in table],
)
async def test_confirm_and_cancel_follow_the_transition_table(
    async_client: redis.asyncio.Redis, action: str, state: Any
) -> None:
    inv = await stocked(async_client, 1)
    order_id = await order_in_state(inv, state)
    outcome = TRANSITIONS[action][state]
    method = getattr(inv, action)
    if outcome == "closed":
        with pytest.raises(redlease.OrderClosed) as info:
            await method(order_id)
        assert info.value.state == state and info.value.order_id == order_id
    else:
        res = await method(order_id)
        assert res.state == (state if outcome == "same" else outcome)
        assert res.changed == (outcome != "same")
        again = await method(order_id)  # twice is a no-op
        assert again == res and not again.changed
    end = await inv.order(order_id)
    sold = 1 if end is not None and end.state == "sold" else 0
    assert await inv.snapshot() == redlease.Stock(1 - sold, 0, sold, 1)


@pytest.mark.parametrize("action", ["confirm", "cancel"])
async def test_unknown_order_is_not_found(async_client: redis.asyncio.Redis, action: str) -> None:
    inv = await stocked(async_client, 1)
    with pytest.raises(redlease.OrderNotFound, match="no order 'nope'") as info:
        await getattr(inv, action)("nope")
    assert info.value.order_id == "nope"
    assert isinstance(info.value, redlease.InventoryError)


# -- key layout -----------------------------------------------------------------------------
async def test_keys_share_one_hash_tag_and_hold_only_live_data(
    async_client: redis.asyncio.Redis,
) -> None:
    inv = redlease.Inventory(async_client, b"\xffsku", prefix="shop")
    await inv.restock(3)
    await inv.reserve(user="u1", order_id="o-1")
    await inv.reserve(user="u2", order_id="o-2")
    names = {k for k in await async_client.keys("*")}
    assert names == {
        b"shop:{\xffsku}:" + suffix
        for suffix in (b"stock", b"orders", b"holds", b"userholds", b"users")
    }
    await inv.confirm("o-1")
    await inv.cancel("o-2")
    # the holds are gone; the orders stay (idempotency), and so do u1's sold units
    assert set(await async_client.keys("*")) == {
        b"shop:{\xffsku}:stock",
        b"shop:{\xffsku}:orders",
        b"shop:{\xffsku}:users",
    }
    assert await async_client.hgetall(b"shop:{\xffsku}:users") == {b"u1": b"1"}
