"""FencedStore against a real server (asyncio; tests/_sync/test_fencing.py is generated)."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio
from redis.cluster import key_slot
from redis.exceptions import RedisError

import redlease.asyncio as redlease
from redlease._core.fencing import FencedKeys
from redlease._core.lock import LockKeys
from tests._async.helpers import wait_until
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(60)


async def _free(client: redis.asyncio.Redis, name: str) -> bool:
    return not await client.exists(LockKeys.build("redlease", name.encode()).lock)


async def test_write_read_and_versions(async_client: redis.asyncio.Redis) -> None:
    store = redlease.FencedStore(async_client, "invoice:42")
    empty = await store.read()
    assert (empty.fence, empty.version, empty.fields, empty.value) == (None, 0, {}, None)

    assert await store.write(3, "draft") == 1
    assert await store.write(3, b"total=10") == 2  # equal fence: the same holder writes twice
    assert await store.update(5, {"state": "paid", "total": 12}) == 3
    record = await store.read()
    assert record.fence == 5 and record.version == 3
    assert record.fields == {b"value": b"total=10", b"state": b"paid", b"total": b"12"}
    assert record.value == b"total=10"

    assert await store.replace(5, {"total": 1.5}) == 4
    assert (await store.read()).fields == {b"total": b"1.5"}


async def test_an_older_fence_is_refused_and_changes_nothing(
    async_client: redis.asyncio.Redis,
) -> None:
    store = redlease.FencedStore(async_client, "acct")
    await store.write(7, "seven")
    for call in (
        lambda: store.write(6, "six"),
        lambda: store.update(6, {"x": 1}),
        lambda: store.replace(0, {"x": 1}),
        lambda: store.delete(6),
    ):
        with pytest.raises(redlease.StaleFence, match=r"fence [06] is older") as info:
            await call()
        assert info.value.highest == 7 and info.value.fence in (0, 6)
        assert info.value.name == "acct"
    record = await store.read()
    assert (record.value, record.fence, record.version) == (b"seven", 7, 1)


async def test_delete_keeps_the_mark_so_a_stale_holder_cannot_resurrect(
    async_client: redis.asyncio.Redis,
) -> None:
    store = redlease.FencedStore(async_client, "doc")
    await store.write(1, "v1")
    assert await store.delete(2) == 2
    record = await store.read()
    assert (record.fields, record.fence, record.version) == ({}, 2, 2)
    with pytest.raises(redlease.StaleFence):
        await store.write(1, "back from the dead")
    assert (await store.read()).fields == {}
    assert await store.write(2, "again") == 3


@pytest.mark.parametrize("top", [1_795_000_000_000_001, 2**53 - 1], ids=["us-now", "2**53"])
async def test_fences_up_to_2_53_compare_exactly(
    async_client: redis.asyncio.Redis, top: int
) -> None:
    """Lock fences are server times in us (16 digits): the store's Lua compares them as
    doubles, exact up to 2**53, so a fence one below the mark is refused and the mark reads
    back unrounded."""
    store = redlease.FencedStore(async_client, f"big:{top}")
    assert await store.write(top, "a") == 1
    with pytest.raises(redlease.StaleFence) as info:
        await store.write(top - 1, "one below")
    assert (info.value.fence, info.value.highest) == (top - 1, top)
    assert await store.write(top + 1, "one above") == 2
    assert (await store.read()).fence == top + 1


async def test_a_stale_holders_write_is_refused(async_client: redis.asyncio.Redis) -> None:
    """A holder paused past its lease writes late with its old fence: refused, data intact."""
    store = redlease.FencedStore(async_client, "orders:7")
    paused = redlease.Lock(async_client, "orders:7", ttl=0.1, renew=False)
    assert await paused.acquire()
    old_fence = paused.fence
    assert old_fence is not None
    assert await wait_until(lambda: _free(async_client, "orders:7"))  # the pause outlives it
    async with redlease.Lock(async_client, "orders:7", timeout=5) as fresh:
        assert fresh.fence is not None and fresh.fence > old_fence
        await store.write(fresh.fence, "fresh")
    with pytest.raises(redlease.StaleFence) as info:
        await store.write(old_fence, "stale")
    assert (info.value.fence, info.value.highest) == (old_fence, fresh.fence)
    assert (await store.read()).value == b"fresh"


async def test_twin_the_same_scenario_with_a_plain_set_corrupts(
    async_client: redis.asyncio.Redis,
) -> None:
    """The twin: the same late write without the fence check overwrites the newer holder's."""
    paused = redlease.Lock(async_client, "orders:8", ttl=0.1, renew=False)
    assert await paused.acquire()
    assert await wait_until(lambda: _free(async_client, "orders:8"))
    async with redlease.Lock(async_client, "orders:8", timeout=5):
        await async_client.set("orders:8:data", "fresh")
    await async_client.set("orders:8:data", "stale")  # the paused holder resumes: no check
    assert await async_client.get("orders:8:data") == b"stale"


async def test_keys_share_one_cluster_slot_with_the_lock() -> None:
    fenced = FencedKeys.build("redlease", b"orders:42")
    lock = LockKeys.build("redlease", b"orders:42")
    assert fenced.data == b"redlease:{orders:42}:fenced"
    slots = {key_slot(k) for k in (*fenced.all, lock.lock, lock.fence)}
    assert len(slots) == 1
    assert not set(fenced.all) & {lock.lock, lock.fence, lock.queue, lock.handoff}


@pytest.mark.parametrize(
    ("fence", "error", "match"),
    [
        (None, TypeError, "lock.fence is None"),
        (True, TypeError, "fence must be an int"),
        ("3", TypeError, "fence must be an int"),
        (1.0, TypeError, "fence must be an int"),
        (-1, ValueError, "fence must be >= 0"),
        (2**53 + 1, ValueError, "fence must be at most"),
    ],
)
async def test_bad_fences_are_refused_before_anything_is_sent(
    async_client: redis.asyncio.Redis, fence: Any, error: type[Exception], match: str
) -> None:
    store = redlease.FencedStore(async_client, "args")
    with pytest.raises(error, match=match):
        await store.write(fence, "x")
    assert await async_client.exists(*FencedKeys.build("redlease", b"args").all) == 0


async def test_bad_values_and_fields_name_the_argument(async_client: redis.asyncio.Redis) -> None:
    store = redlease.FencedStore(async_client, "args")
    with pytest.raises(TypeError, match="value must be bytes, str, int or float"):
        await store.write(1, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="fields must be a mapping"):
        await store.update(1, [("a", 1)])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="fields must not be empty"):
        await store.replace(1, {})
    with pytest.raises(TypeError, match=r"fields\['a'\] must be bytes"):
        await store.update(1, {"a": [1]})
    with pytest.raises(ValueError, match="name must not be empty"):
        redlease.FencedStore(async_client, "")
    with pytest.raises(TypeError, match="client must be"):
        redlease.FencedStore(object(), "x")  # type: ignore[arg-type]


async def test_a_decoding_client_works_too(server: RedisServer) -> None:
    client = redis.asyncio.Redis(host=server.host, port=server.port, decode_responses=True)
    try:
        store = redlease.FencedStore(client, "decoded")
        await client.delete(*[k.decode() for k in FencedKeys.build("redlease", b"decoded").all])
        await store.update(4, {"a": "1"})
        record = await store.read()
        assert (record.fields, record.fence, record.version) == ({b"a": b"1"}, 4, 1)
    finally:
        await client.aclose()


async def test_an_outage_raises_unavailable_with_the_cause(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=1.0)
    try:
        store = redlease.FencedStore(client, "down")
        await store.write(1, "up")
        srv.stop()
        with pytest.raises(redlease.FencedStoreUnavailable, match="could not write") as info:
            await store.write(2, "down")
        assert isinstance(info.value.__cause__, RedisError)
        with pytest.raises(redlease.FencedStoreUnavailable, match="could not read"):
            await store.read()
    finally:
        await client.aclose()
