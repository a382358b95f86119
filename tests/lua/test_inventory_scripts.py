"""The inventory scripts' contracts, one transition at a time (``lua/inventory_*.lua``).

After every script ``available + reserved + sold == total``, none negative; a known order id
is the same purchase again (never takes more); a hold runs out on the server's clock and its
units come back; sold units never go back on sale.
"""

from __future__ import annotations

import time
from typing import Any

import redis

from redlease._core import inventory
from redlease._core.inventory import InventoryKeys, Stock, decode_stock
from redlease._core.scripts import Script

KEYS = InventoryKeys.build("redlease", b"shop")
HOLD, NO_LIMIT, FOREVER = 60_000, 0, 0


def call(client: redis.Redis, script: Script, *args: Any) -> Any:
    return client.evalsha(client.script_load(script.source), 6, *KEYS.all, *args)


def stock(client: redis.Redis) -> Stock:
    return decode_stock(call(client, inventory.SNAPSHOT))


def reserve(
    client: redis.Redis, order: bytes, user: bytes, qty: int, *, hold: int = HOLD, limit: int = 0
) -> Any:
    return call(client, inventory.RESERVE, order, user, qty, hold, limit, FOREVER)


def test_restock_and_a_reservation_move_units_between_the_counts(client: redis.Redis) -> None:
    assert call(client, inventory.RESTOCK, 5, FOREVER) == [b"stock", 5, 0, 0, 5]
    now = reserve(client, b"o1", b"alice", 2)
    assert isinstance(now, int) and abs(now - time.time() * 1000) < 60_000  # server ms
    assert stock(client) == Stock(available=3, reserved=2, sold=0, total=5)


def test_a_retry_of_a_known_order_takes_nothing_more(client: redis.Redis) -> None:
    call(client, inventory.RESTOCK, 5, FOREVER)
    reserve(client, b"o1", b"alice", 2)
    again = reserve(client, b"o1", b"alice", 2)
    assert again[0] == b"order" and again[1] == b"reserved" and again[-1] == 0  # not changed
    assert reserve(client, b"o1", b"bob", 2)[0] == b"conflict"
    assert stock(client).reserved == 2


def test_refusals_take_nothing(client: redis.Redis) -> None:
    call(client, inventory.RESTOCK, 3, FOREVER)
    reserve(client, b"o1", b"alice", 2, limit=2)
    assert reserve(client, b"o2", b"alice", 1, limit=2) == [b"limit", 2, 2, 1]
    assert reserve(client, b"o3", b"bob", 2) == [b"soldout", 1, 2]
    assert stock(client) == Stock(available=1, reserved=2, sold=0, total=3)
    assert call(client, inventory.ORDER, b"o3") == [b"missing"]


def test_confirm_sells_and_cancel_never_puts_sold_units_back(client: redis.Redis) -> None:
    call(client, inventory.RESTOCK, 4, FOREVER)
    reserve(client, b"o1", b"alice", 1)
    reserve(client, b"o2", b"bob", 2)
    sold = call(client, inventory.CONFIRM, b"o1", FOREVER)
    assert sold[:2] == [b"order", b"sold"] and sold[-1] == 1  # changed now
    assert call(client, inventory.CONFIRM, b"o1", FOREVER)[-1] == 0  # already sold
    assert call(client, inventory.CANCEL, b"o1", FOREVER)[0] == b"closed"
    assert call(client, inventory.CANCEL, b"o2", FOREVER)[:2] == [b"order", b"cancelled"]
    assert call(client, inventory.CONFIRM, b"o2", FOREVER)[0] == b"closed"
    assert call(client, inventory.CONFIRM, b"o9", FOREVER) == [b"missing"]
    assert stock(client) == Stock(available=3, reserved=0, sold=1, total=4)


def test_an_expired_hold_gives_its_units_back_and_can_no_longer_be_sold(
    client: redis.Redis,
) -> None:
    call(client, inventory.RESTOCK, 2, FOREVER)
    reserve(client, b"o1", b"alice", 2, hold=1)
    time.sleep(0.01)  # the hold runs out on the server's clock
    assert stock(client) == Stock(available=2, reserved=0, sold=0, total=2)
    assert call(client, inventory.CONFIRM, b"o1", FOREVER)[:2] == [b"closed", b"expired"]
    assert isinstance(reserve(client, b"o2", b"bob", 2), int)  # the units are on sale again


def test_twin_a_live_hold_keeps_its_units(client: redis.Redis) -> None:
    """The twin: the same hold, still live, keeps its units and can be sold, so the release
    above is the expiry's."""
    call(client, inventory.RESTOCK, 2, FOREVER)
    reserve(client, b"o1", b"alice", 2)
    time.sleep(0.01)
    assert reserve(client, b"o2", b"bob", 2)[0] == b"soldout"
    assert call(client, inventory.CONFIRM, b"o1", FOREVER)[:2] == [b"order", b"sold"]


def test_withdraw_is_all_or_nothing_and_leaves_held_units_alone(client: redis.Redis) -> None:
    call(client, inventory.RESTOCK, 3, FOREVER)
    reserve(client, b"o1", b"alice", 2)
    assert call(client, inventory.WITHDRAW, 2, FOREVER) == [b"soldout", 1, 2]
    assert call(client, inventory.WITHDRAW, 1, FOREVER) == [b"stock", 0, 2, 0, 2]


def test_a_restock_past_two_to_the_53_is_refused(client: redis.Redis) -> None:
    call(client, inventory.RESTOCK, 2**53 - 2, FOREVER)
    assert call(client, inventory.RESTOCK, 2, FOREVER)[0] == b"full"
    assert stock(client).total == 2**53 - 2
