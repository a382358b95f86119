"""Inventory's packed reserve command: ids in the client's encoding, a flushed script cache
(asyncio; tests/_sync/test_inventory_reserve_command.py is generated)."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from tests._async.inventory_helpers import keys

pytestmark = pytest.mark.timeout(60)


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
