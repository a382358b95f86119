"""The inventory's pure core, without Redis: keys, the transition table, reply decoding."""

from __future__ import annotations

import re
from importlib import resources

import pytest

import redlease
from redlease._core import inventory as core


def test_keys_share_one_hash_tag() -> None:
    keys = core.InventoryKeys.build("shop", b"sku:1001")
    assert keys.all == [
        keys.stock,
        keys.orders,
        keys.holds,
        keys.userholds,
        keys.users,
        keys.settled,
    ]
    assert all(key.startswith(b"shop:{sku:1001}:") for key in keys.all)


def test_the_lua_transition_table_is_the_python_one() -> None:
    lib = resources.files("redlease").joinpath("lua/inventory_lib.lua").read_text()
    lua: dict[str, dict[str, str]] = {}
    for action, body in re.findall(r"^  (\w+) = \{(.*)\},$", lib, re.MULTILINE):
        lua[action] = dict(re.findall(r"(\w+) = '(\w+)'", body))
    assert lua == core.TRANSITIONS
    for table in core.TRANSITIONS.values():
        assert set(table) == set(core.STATES)


def test_decode_an_order() -> None:
    res = core.decode_reply([b"order", b"reserved", 2, 1_000_500, 1_000_000, b"u1", 1], "s", "o")
    assert res == core.Reservation("o", "u1", 2, "reserved", 1000.5)
    assert res is not None and res.expires_in == 0.5 and res.changed and res.live
    sold = core.decode_reply(["order", "sold", 2, 1_000_500, 2_000_000, "u1", 0], "s", "o")
    assert sold is not None and (sold.expires_at, sold.expires_in, sold.changed) == (
        None,
        None,
        False,
    )
    assert core.decode_reply([b"missing"], "s", "o") is None


def test_decode_refusals_into_errors() -> None:
    with pytest.raises(redlease.SoldOut) as sold_out:
        core.decode_reply([b"soldout", 1, 3], "sku", "o")
    assert (sold_out.value.available, sold_out.value.requested, sold_out.value.name) == (
        1,
        3,
        "sku",
    )
    with pytest.raises(redlease.LimitExceeded) as limit:
        core.decode_reply([b"limit", 2, 2, 1], "sku", "o")
    assert (limit.value.limit, limit.value.already, limit.value.requested) == (2, 2, 1)
    with pytest.raises(redlease.OrderClosed) as closed:
        core.decode_reply([b"closed", b"expired", 1, 5, 9, b"u", 0], "sku", "o")
    assert closed.value.reservation.state == "expired"


@pytest.mark.parametrize(
    "raw",
    [None, [], [b"what"], [b"soldout", 1], [b"order", b"lost", 1, 1, 1, b"u", 0], [b"order", 1]],
)
def test_decode_refuses_nonsense(raw: object) -> None:
    with pytest.raises(ValueError, match="inventory script"):
        core.decode_reply(raw, "sku", "o")


def test_argument_checks() -> None:
    assert core.units(0, "qty", minimum=0) == 0
    assert core.per_user_limit(None) == 0
    assert core.ident("o-1", "order_id") == "o-1"
    with pytest.raises(ValueError, match=r"^qty must be at most"):
        core.units(core.MAX_UNITS + 1, "qty")


def test_decode_a_new_reservation_from_the_servers_time() -> None:
    res = core.decode_reserve(1_000_000, "s", "o", "u1", 2, 500)
    assert res == core.Reservation("o", "u1", 2, "reserved", 1000.5)
    assert res.expires_in == 0.5 and res.changed and res.live
    # Any other reply is an ordinary one: a retry's order, or a refusal.
    known = [b"order", b"reserved", 2, 1_000_500, 1_000_000, b"u1", 0]
    assert core.decode_reserve(known, "s", "o", "u1", 2, 500) == res
    with pytest.raises(redlease.SoldOut):
        core.decode_reserve([b"soldout", 1, 3], "s", "o", "u1", 3, 500)
    with pytest.raises(ValueError, match="unexpected reply"):
        core.decode_reserve([b"missing"], "s", "o", "u1", 2, 500)


def test_packed_reserve_is_what_redis_py_sends() -> None:
    from redis.connection import Connection

    keys = core.InventoryKeys.build("redlease", b"sku:1").all
    args = ["ordré-1".encode(), b"u1", b"1", b"300000", b"0", b"0"]
    head = core.pack_head(core.RESERVE, keys, len(args))
    expected = Connection().pack_command("EVALSHA", core.RESERVE.sha, len(keys), *keys, *args)
    assert core.pack(head, args) == [b"".join(expected)]
