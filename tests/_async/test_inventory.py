"""Inventory against a real server (asyncio; tests/_sync/test_inventory.py is generated)."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import pytest
import redis.asyncio
from redis.exceptions import ConnectionError, TimeoutError

import redlease.asyncio as redlease
from redlease._core import inventory as inventory_core
from redlease._core.inventory import SWEEP, TRANSITIONS, WITHDRAW, InventoryKeys, decode_withdraw
from redlease._core.scripts import Script
from tests._async.helpers import wait_until
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)


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


# -- the reserve command -------------------------------------------------------------------
# reserve() packs its command itself and reads a new reservation from a one-integer reply.
async def encoding_problems(client: redis.asyncio.Redis, inv: Any) -> list[str]:
    """What goes wrong when ``inv`` (on ``client``, which encodes str as latin-1) reserves
    with a non-ASCII order id: the other calls (encoded by redis-py) must find that order."""
    await inv.restock(2)
    res = await inv.reserve(user="u1", order_id="ordré-1")
    problems = []
    if (res.user, res.order_id, res.changed) != ("u1", "ordré-1", True):
        problems.append(f"the reservation says {res}")
    if await client.hget(keys("sku:1").orders, "ordré-1".encode("latin-1")) is None:
        problems.append("the order is not stored under the client's encoding of its id")
    try:
        await inv.confirm("ordré-1")
    except redlease.OrderNotFound:
        problems.append("confirm did not find the order reserve made")
    return problems


async def test_reserve_encodes_ids_as_the_client_does(server: Any) -> None:
    client = redis.asyncio.Redis(host=server.host, port=server.port, encoding="latin-1")
    await client.flushall()
    assert await encoding_problems(client, redlease.Inventory(client, "sku:1")) == []
    await client.aclose()


async def test_reserve_encoding_twin_is_caught(server: Any) -> None:
    """The same check, with reserve encoding its ids as UTF-8 whatever the client says, fails."""
    client = redis.asyncio.Redis(host=server.host, port=server.port, encoding="latin-1")
    await client.flushall()
    inv = redlease.Inventory(client, "sku:1")
    inv._encoding = ("utf-8", "strict")
    problems = await encoding_problems(client, inv)
    # (Whether confirm then misses it depends on redis-py: with hiredis installed, redis-py
    # itself writes a str as UTF-8 whatever the encoding.)
    assert "the order is not stored under the client's encoding of its id" in problems
    await client.aclose()


async def user_round_trip(client: redis.asyncio.Redis, inv: Any) -> list[str]:
    """A non-ASCII user, on a client that encodes str as latin-1: what reads it back wrong."""
    await inv.restock(2)
    seen = []
    for read in (
        lambda: inv.reserve(user="rené", order_id="o-1"),
        lambda: inv.reserve(user="rené", order_id="o-1"),  # the retry, answered with the order
        lambda: inv.order("o-1"),
        lambda: inv.confirm("o-1"),
    ):
        try:
            seen.append((await read()).user)
        except ValueError as exc:
            seen.append(f"ValueError: {exc}")
    return seen


async def test_a_user_id_reads_back_in_the_clients_encoding(server: Any) -> None:
    client = redis.asyncio.Redis(host=server.host, port=server.port, encoding="latin-1")
    await client.flushall()
    assert await user_round_trip(client, redlease.Inventory(client, "sku:1")) == ["rené"] * 4
    await client.aclose()


async def test_twin_a_user_id_decoded_as_utf8_is_not_read_back(server: Any) -> None:
    """The twin: decoded as UTF-8 whatever the client's encoding (as before), the stored
    latin-1 user id cannot be read back."""
    client = redis.asyncio.Redis(host=server.host, port=server.port, encoding="latin-1")
    await client.flushall()
    inv = redlease.Inventory(client, "sku:1")
    seen = await user_round_trip(client, inv)
    assert seen[0] == "rené"  # a new reservation's user is the caller's own str
    inv._encoding = ("utf-8", "strict")
    assert "unexpected order reply" in (await user_round_trip_read(inv))
    await client.aclose()


async def user_round_trip_read(inv: Any) -> str:
    try:
        return (await inv.order("o-1")).user  # type: ignore[no-any-return]
    except ValueError as exc:
        return str(exc)


async def test_reserve_survives_a_flushed_script_cache(make_server: Any) -> None:
    """The packed EVALSHA meets NOSCRIPT after SCRIPT FLUSH: the script is sent again."""
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port)
    inv = redlease.Inventory(client, "sku:1")
    await inv.restock(3)
    await inv.reserve(user="u1", order_id="o-1")  # EVAL, then the server has the script
    await inv.reserve(user="u2", order_id="o-2")  # the packed EVALSHA
    await client.script_flush()
    res = await inv.reserve(user="u3", order_id="o-3")
    assert (res.state, res.changed) == ("reserved", True)
    assert await inv.order("o-3") == res
    assert await inv.snapshot() == redlease.Stock(0, 3, 0, 3)
    await client.aclose()


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
