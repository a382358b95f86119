"""Inventory errors: bad input refused before Redis, outages as InventoryUnavailable
(asyncio; tests/_sync/test_inventory_errors.py is generated)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import redis.asyncio
from redis.exceptions import ConnectionError, TimeoutError

import redlease.asyncio as redlease
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)


# -- bad input ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "error", "arg"),
    [
        ({"qty": 0}, ValueError, "qty"),
        ({"qty": -1}, ValueError, "qty"),
        ({"qty": 10**13}, ValueError, "qty"),
        ({"qty": 1.5}, TypeError, "qty"),
        ({"qty": "1"}, TypeError, "qty"),
        ({"qty": None}, TypeError, "qty"),
        ({"qty": True}, TypeError, "qty"),
        ({"user": ""}, ValueError, "user"),
        ({"user": None}, TypeError, "user"),
        ({"user": b"u1"}, TypeError, "user"),
        ({"order_id": ""}, ValueError, "order_id"),
        ({"order_id": 7}, TypeError, "order_id"),
        ({"hold": 0}, ValueError, "hold"),
        ({"hold": -1.0}, ValueError, "hold"),
        ({"hold": math.nan}, ValueError, "hold"),
        ({"hold": math.inf}, ValueError, "hold"),
        ({"hold": "5"}, TypeError, "hold"),
        ({"per_user_limit": 0}, ValueError, "per_user_limit"),
        ({"per_user_limit": 1.0}, TypeError, "per_user_limit"),
        ({"per_user_limit": True}, TypeError, "per_user_limit"),
    ],
)
async def test_bad_reserve_arguments_are_refused_before_redis(
    async_client: redis.asyncio.Redis, kwargs: dict[str, Any], error: type, arg: str
) -> None:
    inv = redlease.Inventory(async_client, "sku:1")
    call: dict[str, Any] = {"user": "u1", "order_id": "o-1", "qty": 1, **kwargs}
    with pytest.raises(error, match=f"^{arg} "):
        await inv.reserve(**call)
    assert await async_client.keys("*") == []


@pytest.mark.parametrize(
    ("qty", "error"), [(-1, ValueError), (1.5, TypeError), (True, TypeError), ("3", TypeError)]
)
async def test_bad_restock_is_refused(
    async_client: redis.asyncio.Redis, qty: Any, error: type
) -> None:
    inv = redlease.Inventory(async_client, "sku:1")
    with pytest.raises(error, match=r"^qty "):
        await inv.restock(qty)
    assert await async_client.keys("*") == []


@pytest.mark.parametrize("method", ["confirm", "cancel", "order"])
@pytest.mark.parametrize(("order_id", "error"), [("", ValueError), (None, TypeError)])
async def test_bad_order_ids_are_refused(
    async_client: redis.asyncio.Redis, method: str, order_id: Any, error: type
) -> None:
    inv = redlease.Inventory(async_client, "sku:1")
    with pytest.raises(error, match=r"^order_id "):
        await getattr(inv, method)(order_id)


async def test_bad_constructor_arguments(async_client: redis.asyncio.Redis) -> None:
    with pytest.raises(ValueError, match=r"^name "):
        redlease.Inventory(async_client, "")
    with pytest.raises(TypeError, match=r"^name "):
        redlease.Inventory(async_client, 1001)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^prefix "):
        redlease.Inventory(async_client, "sku", prefix="a{b}")
    with pytest.raises(TypeError, match="client must be a redis"):
        redlease.Inventory(AsyncTasks.WRONG_CLIENT(), "sku")  # type: ignore[arg-type]


# -- outages --------------------------------------------------------------------------------
async def test_outage_raises_inventory_unavailable(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=0.5)
    inv = redlease.Inventory(client, "down")
    await inv.restock(1)
    srv.stop()
    calls = [
        ("reserve", lambda: inv.reserve(user="u1", order_id="o-1")),
        ("confirm", lambda: inv.confirm("o-1")),
        ("cancel", lambda: inv.cancel("o-1")),
        ("restock", lambda: inv.restock(1)),
        ("read", inv.snapshot),
        ("read", lambda: inv.order("o-1")),
    ]
    for action, call in calls:
        with pytest.raises(
            redlease.InventoryUnavailable, match=f"could not {action} inventory 'down'"
        ) as info:
            await call()
        assert isinstance(info.value.__cause__, (ConnectionError, TimeoutError, OSError))
        assert isinstance(info.value, redlease.InventoryError)
    await client.aclose()
