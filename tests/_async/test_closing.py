"""close() and closing(): nothing of redlease's is left for a client (asyncio; the sync twin is
generated). Connections are counted with CLIENT LIST on a server of the test's own."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
import redis
import redis.asyncio

import redlease.asyncio as redlease
from redlease._core.lock import LockKeys
from tests._async.helpers import wait_until
from tests.support import AsyncTasks
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(60)


def keys(name: str) -> LockKeys:
    return LockKeys.build("redlease", name.encode())


ADMIN = "test-admin"


def others(admin: redis.Redis) -> int:
    """Connections to the server other than ``admin``'s own (it is named ``test-admin``)."""
    return sum(1 for c in admin.client_list() if c["name"] != ADMIN)


async def assert_no_connections(admin: redis.Redis) -> None:
    """Every connection but ``admin``'s is gone (bounded wait: the server sees a close late)."""

    async def check() -> bool:
        return others(admin) == 0

    if not await wait_until(check, limit=5):
        left = [(c["id"], c["cmd"], c["age"]) for c in admin.client_list() if c["name"] != ADMIN]
        raise AssertionError(f"connections left (id, last command, age): {left}")


async def hold_and_wait(client: redis.asyncio.Redis, admin: redis.Redis, name: str) -> None:
    """Everything redlease makes for a client: a lease renewed by the watchdog, and a waiter
    woken through the waiter hub's subscription."""
    # Renewed every 0.5 s: a lease of 0.3 s ran out on a loaded CI machine (LockLost).
    holder = redlease.Lock(client, name, ttl=1.5)
    waiter = redlease.Lock(client, name)

    async def queued() -> bool:
        return int(admin.zcard(keys(name).queue)) == 1

    async def hold() -> None:
        assert await holder.acquire()
        assert await wait_until(queued)
        await AsyncTasks.sleep(0.6)  # renewed at least once meanwhile
        await holder.release()

    async def wait() -> None:
        async def held() -> bool:
            return int(admin.exists(keys(name).lock)) == 1

        assert await wait_until(held)
        assert await waiter.acquire(timeout=10)
        await waiter.release()

    await AsyncTasks.gather(hold, wait)


async def test_close_leaves_no_task_and_no_connection(make_server: Any) -> None:
    srv = make_server()
    admin = srv.client(client_name=ADMIN)
    client = redis.asyncio.Redis(host=srv.host, port=srv.port)
    before = AsyncTasks.background()
    await hold_and_wait(client, admin, "close")
    assert AsyncTasks.background() - before  # the watchdog and the hub's reader linger
    assert others(admin) >= 2  # redlease's pool and its subscription
    started = time.monotonic()
    await redlease.close(client)
    assert time.monotonic() - started < 2.0  # no waiting out the linger
    assert AsyncTasks.background() - before == set()
    await assert_no_connections(admin)
    await client.aclose()
    admin.close()


async def test_without_close_they_stay(make_server: Any) -> None:
    """The twin: the same use without close() leaves connections (and, for a while, the
    background work), so the test above would catch a close() that did nothing."""
    srv = make_server()
    admin = srv.client(client_name=ADMIN)
    client = redis.asyncio.Redis(host=srv.host, port=srv.port)
    before = AsyncTasks.background()
    await hold_and_wait(client, admin, "no-close")
    await AsyncTasks.sleep(0.2)
    assert AsyncTasks.background() - before
    assert others(admin) >= 1
    await redlease.close(client)
    await assert_no_connections(admin)
    await client.aclose()
    admin.close()


async def test_twenty_short_lived_clients_leave_nothing(make_server: Any) -> None:
    srv = make_server()
    admin = srv.client(client_name=ADMIN)
    before = AsyncTasks.background()
    for i in range(20):
        client = redis.asyncio.Redis(host=srv.host, port=srv.port)
        async with client, redlease.closing(client) as same:
            assert same is client
            async with redlease.Lock(client, f"short:{i}") as held:
                assert held.fence > 0
    assert AsyncTasks.background() - before == set()
    await assert_no_connections(admin)
    admin.close()


async def test_a_lease_held_at_close_is_reported_not_released(
    async_client: redis.asyncio.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    lock = redlease.Lock(async_client, "held-at-close", ttl=0.6)
    assert await lock.acquire()
    token = await async_client.get(keys("held-at-close").lock)
    with caplog.at_level(logging.WARNING, logger="redlease"):
        await redlease.close(async_client)
    [record] = [r for r in caplog.records if getattr(r, "redlease_event", "") == "held_at_close"]
    assert record.levelno == logging.WARNING
    assert record.redlease_name == "held-at-close"  # type: ignore[attr-defined]
    assert record.redlease_primitive == "lock"  # type: ignore[attr-defined]
    assert record.redlease_fence == lock.fence  # type: ignore[attr-defined]
    assert "no longer renewed" in record.getMessage()
    assert await async_client.get(keys("held-at-close").lock) == token  # not released

    async def ran_out() -> bool:
        return int(await async_client.exists(keys("held-at-close").lock)) == 0

    assert await wait_until(ran_out, limit=5)  # no longer renewed: gone within its ttl


async def test_the_holder_may_still_release_after_close(async_client: redis.asyncio.Redis) -> None:
    lock = redlease.Lock(async_client, "release-after-close", ttl=10.0)
    assert await lock.acquire()
    await redlease.close(async_client)
    await lock.release()  # through a fresh connection
    assert await async_client.exists(keys("release-after-close").lock) == 0
    await redlease.close(async_client)


async def test_a_wait_in_progress_at_close_fails_unavailable(
    async_client: redis.asyncio.Redis,
) -> None:
    holder = redlease.Lock(async_client, "in-flight", ttl=10.0)
    assert await holder.acquire()
    waiter = redlease.Lock(async_client, "in-flight")
    started = time.monotonic()

    async def wait() -> None:
        with pytest.raises(redlease.LockUnavailable, match=r"redlease\.close"):
            await waiter.acquire(timeout=20)

    async def close_when_queued() -> None:
        async def queued() -> bool:
            return int(await async_client.zcard(keys("in-flight").queue)) == 1

        assert await wait_until(queued)
        await redlease.close(async_client)

    await AsyncTasks.gather(wait, close_when_queued)
    assert time.monotonic() - started < 10  # it did not wait out its timeout
    await holder.release()
    await redlease.close(async_client)


async def test_the_client_works_again_after_close(make_server: Any) -> None:
    srv = make_server()
    admin = srv.client(client_name=ADMIN)
    client = redis.asyncio.Redis(host=srv.host, port=srv.port)
    before = AsyncTasks.background()
    await hold_and_wait(client, admin, "again")
    await redlease.close(client)
    await hold_and_wait(client, admin, "again")  # starts afresh
    await redlease.close(client)
    assert AsyncTasks.background() - before == set()
    await assert_no_connections(admin)
    await client.aclose()
    admin.close()


async def test_redlock_clients_close_one_by_one(
    async_redlock_clients: list[redis.asyncio.Redis], redlock_servers: list[RedisServer]
) -> None:
    before = AsyncTasks.background()
    async with redlease.Redlock(async_redlock_clients, "everywhere", ttl=1.0) as held:
        assert held.fence >= 1
    for client in async_redlock_clients:
        await redlease.close(client)
    assert AsyncTasks.background() - before == set()
    for srv in redlock_servers:
        with srv.client(client_name=ADMIN) as admin:
            await assert_no_connections(admin)


async def test_close_twice_or_unused_does_nothing_and_checks_its_argument(
    async_client: redis.asyncio.Redis,
) -> None:
    await redlease.close(async_client)  # never used by redlease
    await redlease.close(async_client)
    with pytest.raises(TypeError, match="client must be"):
        await redlease.close(AsyncTasks.WRONG_CLIENT())
    with pytest.raises(TypeError, match="client must be"):
        redlease.closing(object())
