"""The ``redlease`` logger: each event, its level and its structured fields (asyncio; the sync
twin is generated). That it prints nothing unless configured: tests/test_operating.py."""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._core.lease import process_id
from redlease._core.lock import LockKeys
from tests._async.helpers import wait_until
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)


def keys(name: str) -> LockKeys:
    return LockKeys.build("redlease", name.encode())


def events(caplog: pytest.LogCaptureFixture, event: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "redlease_event", None) == event]


def logged(caplog: pytest.LogCaptureFixture, event: str, n: int = 1) -> Any:
    async def check() -> bool:
        return len(events(caplog, event)) >= n

    return check


@pytest.fixture(autouse=True)
def info(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="redlease")


async def test_a_lease_found_gone_by_the_watchdog(
    async_client: redis.asyncio.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    lock = redlease.Lock(async_client, "log:gone", ttl=0.6)
    assert await lock.acquire()
    fence = lock.fence
    await async_client.set(keys("log:gone").lock, b"someone-else", px=10_000)
    assert await wait_until(logged(caplog, "lease_lost"))
    [record] = events(caplog, "lease_lost")
    assert record.levelno == logging.WARNING
    assert record.redlease_name == "log:gone"  # type: ignore[attr-defined]
    assert record.redlease_primitive == "lock"  # type: ignore[attr-defined]
    assert record.redlease_fence == fence  # type: ignore[attr-defined]
    assert record.redlease_reason == "gone"  # type: ignore[attr-defined]
    assert f"'log:gone' lost its lease (fence {fence})" in record.getMessage()
    with pytest.raises(redlease.LockLost):
        await lock.release()
    assert len(events(caplog, "lease_lost")) == 1  # the release does not report it again


async def test_a_lease_found_gone_by_release(
    async_client: redis.asyncio.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    lock = redlease.RLock(async_client, "log:release", ttl=10.0)
    assert await lock.acquire()
    await async_client.delete(keys("log:release").lock)
    with pytest.raises(redlease.LockLost):
        await lock.release()
    [record] = events(caplog, "lease_lost")
    assert record.redlease_reason == "release"  # type: ignore[attr-defined]
    assert record.redlease_primitive == "rlock"  # type: ignore[attr-defined]


async def test_an_outage_is_logged_once_then_its_end(
    make_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=0.3)
    lock = redlease.Lock(client, "log:outage", ttl=3.0)  # renewed every second
    assert await lock.acquire()
    srv.pause()
    try:
        assert await wait_until(logged(caplog, "renewal_failed"), limit=10)
    finally:
        srv.resume()
    assert await wait_until(logged(caplog, "server_available"), limit=10)
    [down] = events(caplog, "server_unavailable")  # once, however many calls failed
    assert down.levelno == logging.WARNING
    assert down.redlease_server == f"{srv.host}:{srv.port}/0"  # type: ignore[attr-defined]
    assert "TimeoutError" in down.redlease_error  # type: ignore[attr-defined]
    [up] = events(caplog, "server_available")
    assert up.levelno == logging.INFO
    failed = events(caplog, "renewal_failed")[0]
    assert failed.levelno == logging.WARNING
    assert failed.redlease_name == "log:outage"  # type: ignore[attr-defined]
    assert failed.redlease_names == ["log:outage"]  # type: ignore[attr-defined]
    assert failed.redlease_leases == 1  # type: ignore[attr-defined]
    assert 0 < failed.redlease_retry <= 1.0  # type: ignore[attr-defined]
    assert "retrying" in failed.getMessage()
    with contextlib.suppress(redlease.LockLost):  # kept, unless the machine was very slow
        await lock.release()
    await redlease.close(client)
    await client.aclose()


async def test_a_lease_that_runs_out_during_an_outage(
    make_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=0.3)
    told: list[int] = []
    lock = redlease.Lock(client, "log:expired", ttl=1.0, on_lost=lambda: told.append(1))
    assert await lock.acquire()
    srv.pause()
    try:
        assert await wait_until(logged(caplog, "lease_lost"), limit=10)
    finally:
        srv.resume()
    [record] = events(caplog, "lease_lost")
    assert record.redlease_reason == "expired"  # type: ignore[attr-defined]
    assert "while renewals got no answer" in record.getMessage()

    async def was_told() -> bool:  # (on_lost runs off the watchdog's path: soon after)
        return told == [1]

    assert await wait_until(was_told, limit=2)
    await redlease.close(client)
    await client.aclose()


async def test_a_waiter_skipping_a_dead_one_is_logged(
    async_client: redis.asyncio.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    holder = redlease.Lock(async_client, "log:dead", handoff=0.05)
    waiter = redlease.Lock(async_client, "log:dead", handoff=0.05)

    async def queued() -> bool:
        return int(await async_client.zcard(keys("log:dead").queue)) >= 2

    async def hold() -> None:
        assert await holder.acquire()
        assert await wait_until(queued)
        await holder.release()

    async def wait() -> None:
        assert await wait_until(holder.locked)
        # A waiter of this very process (which listens) that will never claim its grant: the
        # release grants it the lock, and the next waiter skips it when the grant lapses. (A
        # waiter whose process does not listen at all is skipped by the script at once.)
        await async_client.zadd(keys("log:dead").queue, {process_id() + b".waiter": 0})
        assert await waiter.acquire(timeout=10)
        await waiter.release()

    await AsyncTasks.gather(hold, wait)
    [record] = events(caplog, "handoff_skipped")
    assert record.levelno == logging.INFO
    assert "did not take its turn" in record.getMessage()
    assert record.redlease_token.startswith(process_id().decode() + ".")  # type: ignore[attr-defined]


async def test_an_on_lost_that_raises_is_logged(
    async_client: redis.asyncio.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    def on_lost() -> None:
        raise RuntimeError("boom")

    lock = redlease.Lock(async_client, "log:callback", ttl=0.3, on_lost=on_lost)
    assert await lock.acquire()
    await async_client.delete(keys("log:callback").lock)
    assert await wait_until(logged(caplog, "on_lost_failed"))
    [record] = events(caplog, "on_lost_failed")
    assert record.levelno == logging.ERROR and record.exc_info is not None
    with pytest.raises(redlease.LockLost):
        await lock.release()


async def test_a_redlock_renewal_without_a_majority_is_logged(
    async_redlock_clients: list[redis.asyncio.Redis],
    redlock_servers: list[Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    lock = redlease.Redlock(async_redlock_clients, "log:redlock", ttl=1.5)  # renewed every 0.5 s
    assert await lock.acquire()
    for srv in redlock_servers[:3]:
        srv.pause()
    try:
        assert await wait_until(logged(caplog, "renewal_failed"), limit=10)
    finally:
        for srv in redlock_servers[:3]:
            srv.resume()
    failed = events(caplog, "renewal_failed")[0]
    assert failed.redlease_primitive == "redlock"  # type: ignore[attr-defined]
    assert failed.redlease_name == "log:redlock"  # type: ignore[attr-defined]
    assert "2 of 5 servers answered, 3 needed" in failed.redlease_error  # type: ignore[attr-defined]
    with contextlib.suppress(redlease.LockLost):
        await lock.release()
    for client in async_redlock_clients:
        await redlease.close(client)
