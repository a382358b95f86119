"""ReadWriteLock against a real server (asyncio; tests/_sync/test_rwlock.py is generated)."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._core.rwlock import rwlock_keys
from redlease._core.shared import SharedKeys
from tests._async.helpers import wait_until
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)


def keys(name: str) -> SharedKeys:
    return rwlock_keys("redlease", name.encode())


async def test_readers_share_a_writer_excludes(async_client: redis.asyncio.Redis) -> None:
    rw = redlease.ReadWriteLock(async_client, "cfg", ttl=10.0)
    other = redlease.ReadWriteLock(async_client, "cfg", ttl=10.0)
    assert await rw.read.acquire()
    assert await AsyncTasks.run(lambda: other.read.acquire(timeout=0))  # readers share
    info = await rw.inspect()
    assert (info.readers, info.writer) == (2, False)

    async def writer_refused() -> bool:
        return await other.write.acquire(timeout=0.2)

    assert not await AsyncTasks.run(writer_refused)
    await rw.read.release()
    assert await rw.read.owned() is False
    with pytest.raises(redlease.LockNotOwned):
        await rw.read.release()


async def test_the_writer_holds_alone_with_a_fence(async_client: redis.asyncio.Redis) -> None:
    rw = redlease.ReadWriteLock(async_client, "w", ttl=10.0)
    other = redlease.ReadWriteLock(async_client, "w", ttl=10.0)
    async with rw.write as held:
        assert held.fence is not None and held.fence >= 1
        assert await rw.write.owned()
        assert (await rw.inspect()).writer
        assert not await AsyncTasks.run(lambda: other.read.acquire(timeout=0.2))
        assert not await AsyncTasks.run(lambda: other.write.acquire(timeout=0))
        first = held.fence
    async with other.write as again:
        assert (again.fence or 0) > first


async def test_the_writer_may_read_but_a_reader_may_not_upgrade(
    async_client: redis.asyncio.Redis,
) -> None:
    rw = redlease.ReadWriteLock(async_client, "up", ttl=10.0)
    async with rw.write, rw.read:  # the write holder may also take the read lock
        info = await rw.inspect()
        assert (info.readers, info.writer) == (1, True)
    async with rw.read:
        with pytest.raises(redlease.LockUpgradeError, match="holds a read share"):
            await rw.write.acquire()
    assert isinstance(redlease.LockUpgradeError("x"), redlease.LockError)


async def test_writing_again_forever_is_refused(async_client: redis.asyncio.Redis) -> None:
    rw = redlease.ReadWriteLock(async_client, "again")
    assert await rw.write.acquire()
    with pytest.raises(RuntimeError, match="already held"):
        await rw.write.acquire()
    assert not await rw.write.acquire(timeout=0.1)
    await rw.write.release()


async def test_a_waiting_writer_stops_new_readers(async_client: redis.asyncio.Redis) -> None:
    """Writer preference: a reader arriving after a queued writer waits for it."""
    rw = redlease.ReadWriteLock(async_client, "pref", ttl=30.0)
    order: list[str] = []

    async def first_reader() -> None:
        assert await rw.read.acquire()
        assert await wait_until(lambda: _queued(async_client, "pref", 2))
        order.append("reader 1 out")
        await rw.read.release()

    async def writer() -> None:
        assert await wait_until(lambda: _held(rw))
        w = redlease.ReadWriteLock(async_client, "pref")
        async with w.write:
            order.append("writer")

    async def late_reader() -> None:
        assert await wait_until(lambda: _queued(async_client, "pref", 1))
        r = redlease.ReadWriteLock(async_client, "pref")
        async with r.read:
            order.append("reader 2")

    await AsyncTasks.gather(first_reader, writer, late_reader)
    assert order == ["reader 1 out", "writer", "reader 2"]


async def test_readers_queued_behind_a_writer_are_woken_together(
    async_client: redis.asyncio.Redis,
) -> None:
    rw = redlease.ReadWriteLock(async_client, "batch", ttl=30.0)
    inside: list[int] = []

    async def write_then_release() -> None:
        assert await rw.write.acquire()
        assert await wait_until(lambda: _queued(async_client, "batch", 3))
        await rw.write.release()

    def reader(i: int) -> Any:
        async def run() -> None:
            assert await wait_until(lambda: _held(rw))
            r = redlease.ReadWriteLock(async_client, "batch")
            async with r.read:
                inside.append(i)
                assert await wait_until(lambda: _count(inside, 3))  # all three at once

        return run

    await AsyncTasks.gather(write_then_release, *(reader(i) for i in range(3)))


async def test_a_crashed_readers_share_comes_back(async_client: redis.asyncio.Redis) -> None:
    crashed = redlease.ReadWriteLock(async_client, "crash", ttl=0.3, renew=False)
    assert await crashed.read.acquire()
    writer = redlease.ReadWriteLock(async_client, "crash")

    async def write() -> bool:
        got = await writer.write.acquire(timeout=10)
        await writer.write.release()
        return got

    assert await AsyncTasks.run(write)
    with pytest.raises(redlease.LockLost):
        await crashed.read.release()


async def test_a_writer_units_are_exact(async_client: redis.asyncio.Redis) -> None:
    """A writer's units survive their trip through Lua: no reader fits beside it."""
    rw = redlease.ReadWriteLock(async_client, "exact")
    assert await rw.write.acquire()
    stored = await async_client.hget(keys("exact").units, (await _tokens(async_client))[0])
    assert stored == b"1000000000000"
    await rw.write.release()


async def test_outage_raises_unavailable(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=0.5)
    rw = redlease.ReadWriteLock(client, "down")
    srv.stop()
    with pytest.raises(redlease.LockUnavailable) as info:
        await rw.read.acquire()
    assert isinstance(info.value, redlease.Unavailable)
    await client.aclose()


async def _tokens(client: redis.asyncio.Redis) -> list[bytes]:
    return list(await client.zrange(keys("exact").holders, 0, -1))


async def _queued(client: redis.asyncio.Redis, name: str, n: int) -> bool:
    return int(await client.zcard(keys(name).queue)) >= n


async def _held(rw: redlease.ReadWriteLock) -> bool:
    info = await rw.inspect()
    return info.readers > 0 or info.writer


async def _count(items: list[int], n: int) -> bool:
    return len(items) >= n


async def test_upgrade_and_writer_reads_are_recognized_across_objects(
    async_client: redis.asyncio.Redis,
) -> None:
    first = redlease.ReadWriteLock(async_client, "objects")
    second = redlease.ReadWriteLock(async_client, "objects")
    async with first.read:
        with pytest.raises(redlease.LockUpgradeError):
            await second.write.acquire(timeout=5)
    async with first.write:
        assert await second.read.acquire(timeout=0)  # the write holder reads, any object
        await second.read.release()
    other_name = redlease.ReadWriteLock(async_client, "elsewhere")
    async with first.read:
        assert await other_name.write.acquire(timeout=0)  # another name: no upgrade
        await other_name.write.release()
