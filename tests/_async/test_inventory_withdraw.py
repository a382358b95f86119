"""Inventory.withdraw against a real server: only available units, expired holds first
(asyncio; tests/_sync/test_inventory_withdraw.py is generated)."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._core.inventory import WITHDRAW, decode_withdraw
from tests._async.helpers import wait_until
from tests._async.inventory_helpers import expired, keys, raw_stock, stocked

pytestmark = pytest.mark.timeout(60)


# -- withdraw -------------------------------------------------------------------------------
async def withdraw_problems(client: redis.asyncio.Redis, withdraw: Any) -> list[str]:
    """What goes wrong when ``withdraw(qty)`` asks for more than is available while units
    are held and sold: the refusal must take nothing and leave every buyer's units."""
    inv = await stocked(client, 10)
    await inv.reserve(user="u1", order_id="held", qty=3)
    await inv.reserve(user="u2", order_id="sold", qty=2)
    await inv.confirm("sold")
    problems = []
    try:
        await withdraw(7)  # 5 available: 2 of these would be held or sold units
        problems.append("withdrawing more than the available units was not refused")
    except redlease.SoldOut as exc:
        if (exc.available, exc.requested) != (5, 7):
            problems.append(f"wrong refusal: {exc}")
    stock = await raw_stock(client)
    if stock != {"available": 5, "reserved": 3, "sold": 2, "total": 10}:
        problems.append(f"the stock changed: {stock}")
    return problems


async def test_withdraw_takes_only_available_units(async_client: redis.asyncio.Redis) -> None:
    inv = redlease.Inventory(async_client, "sku:1")
    assert await withdraw_problems(async_client, inv.withdraw) == []
    assert await inv.withdraw(4) == redlease.Stock(1, 3, 2, 6)
    assert (await inv.confirm("held")).state == "sold"  # the held units are still there
    assert await inv.withdraw(1) == redlease.Stock(0, 0, 5, 5)
    with pytest.raises(redlease.SoldOut, match=r"cannot withdraw 1 units .*0 available"):
        await inv.withdraw(1)
    assert await raw_stock(async_client) == {"available": 0, "reserved": 0, "sold": 5, "total": 5}


async def test_withdraw_twin_without_the_check_is_caught(
    async_client: redis.asyncio.Redis,
) -> None:
    """The same check, on withdraw without its ``available < qty`` refusal, finds the harm."""
    source = WITHDRAW.source.replace(
        "if available < qty then return {'soldout', available, qty} end", ""
    )
    assert source != WITHDRAW.source

    async def unchecked(qty: int) -> Any:
        raw = await async_client.eval(source, 6, *keys("sku:1").all, qty, 0)
        return decode_withdraw(raw, "sku:1")

    problems = await withdraw_problems(async_client, unchecked)
    assert "withdrawing more than the available units was not refused" in problems
    assert any("the stock changed" in p and "'available': -2" in p for p in problems)


async def test_withdraw_first_settles_expired_holds(async_client: redis.asyncio.Redis) -> None:
    inv = await stocked(async_client, 3)
    await inv.reserve(user="u1", order_id="o-1", qty=2, hold=0.2)
    assert await wait_until(lambda: expired(inv, "o-1"))
    assert await inv.withdraw(3) == redlease.Stock(0, 0, 0, 0)
    assert await raw_stock(async_client) == {"available": 0, "reserved": 0, "total": 0}
    gone = await inv.order("o-1")
    assert gone is not None and gone.state == "expired"  # the id still answers retries


@pytest.mark.parametrize(
    ("qty", "error"),
    [(0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError), ("3", TypeError)],
)
async def test_bad_withdraw_is_refused(
    async_client: redis.asyncio.Redis, qty: Any, error: type
) -> None:
    inv = redlease.Inventory(async_client, "sku:1")
    with pytest.raises(error, match=r"^qty "):
        await inv.withdraw(qty)
    assert await async_client.keys("*") == []
