"""Helpers shared by the Inventory tests (test_inventory_*.py; generated into
tests/_sync/inventory_helpers.py)."""

from __future__ import annotations

from typing import Any

import redis.asyncio

import redlease.asyncio as redlease
from redlease._core.inventory import InventoryKeys


def keys(name: str) -> InventoryKeys:
    return InventoryKeys.build("redlease", name.encode())


async def stocked(client: redis.asyncio.Redis, units: int, name: str = "sku:1") -> Any:
    inv = redlease.Inventory(client, name)
    await inv.restock(units)
    return inv


async def expired(inv: Any, order_id: str) -> bool:
    order = await inv.order(order_id)
    return order is not None and order.state == "expired"


async def raw_stock(client: redis.asyncio.Redis, name: str = "sku:1") -> dict[str, int]:
    """The stock hash as stored (expired holds not yet settled still count as reserved)."""
    raw = await client.hgetall(keys(name).stock)
    return {k.decode(): int(v) for k, v in raw.items()}
