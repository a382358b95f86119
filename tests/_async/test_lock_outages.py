"""Lock through outages: a stopped, hung or restarted server, closed connections
(asyncio; tests/_sync/test_lock_outages.py is generated)."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
import redis.asyncio
from redis.exceptions import ConnectionError, TimeoutError

import redlease._async.kept_connections as keeper_module
import redlease._async.server_renewal as server_renewal_module
import redlease.asyncio as redlease
from redlease._async.kept_connections import TRUSTED
from redlease._async.runtime import runtime_for
from tests._async.helpers import wait_until
from tests._async.lock_helpers import is_free
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)


# -- outages --------------------------------------------------------------------------------
async def test_outage_raises_unavailable_not_false(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=0.5)
    lock = redlease.Lock(client, "down", timeout=None)  # waiting forever is for contention
    srv.stop()
    with pytest.raises(redlease.LockUnavailable, match="could not acquire lock 'down'") as info:
        await lock.acquire()
    assert isinstance(info.value.__cause__, (ConnectionError, TimeoutError, OSError))
    await client.aclose()


async def test_release_during_outage_raises_and_lets_go(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=0.5)
    lock = redlease.Lock(client, "down2", ttl=2.0)
    await lock.acquire()
    srv.stop()
    with pytest.raises(redlease.LockUnavailable) as info:
        await lock.release()
    assert info.value.__cause__ is not None
    assert lock.fence is None  # the handle let go; the lease runs out on its own
    await client.aclose()


async def test_hung_server_raises_unavailable_and_leaves_no_lock(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=0.3)
    lock = redlease.Lock(client, "hang", ttl=1.0)
    srv.pause()
    try:
        with pytest.raises(redlease.LockUnavailable) as info:
            await lock.acquire()
        assert isinstance(info.value.__cause__, (TimeoutError, ConnectionError))
    finally:
        srv.resume()
    check = redis.asyncio.Redis(host=srv.host, port=srv.port)
    assert await wait_until(lambda: is_free(check, "hang"), limit=5.0)  # at most the lease
    await check.aclose()
    await client.aclose()


# -- every call is bounded: its timeout plus at most one socket timeout (issue 8) -----------
SLACK = 1.5  # seconds of scheduling noise allowed on a loaded machine


async def test_a_hung_server_costs_the_timeout_plus_one_socket_timeout(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=3.0)
    srv.pause()  # hung before the first call: the connection's handshake hangs too
    try:
        started = time.monotonic()
        with pytest.raises(redlease.LockUnavailable):
            await redlease.Lock(client, "bounded", timeout=0.2).acquire()
        # The failed acquire's clean-up gets what is left of the bound, not a socket timeout
        # of its own (that took 2 x 3 s).
        assert time.monotonic() - started < 0.2 + 3.0 + SLACK
    finally:
        srv.resume()
    await client.aclose()


async def test_a_waiter_whose_timeout_ends_in_an_outage_is_told_unavailable_not_false(
    make_server: Any,
) -> None:
    srv = make_server()
    holder_client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=1.0)
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=1.0)
    holder = redlease.Lock(holder_client, "outage", ttl=30.0)
    await holder.acquire()
    waiter = redlease.Lock(client, "outage")
    assert await waiter.acquire(timeout=0.3) is False  # contention: False (and warm)

    async def hang_soon() -> None:
        await AsyncTasks.sleep(0.3)
        srv.pause()

    started = time.monotonic()
    try:
        with pytest.raises(redlease.LockUnavailable, match="leave the queue"):
            await AsyncTasks.gather(lambda: waiter.acquire(timeout=1.0), hang_soon)
        assert time.monotonic() - started < 1.0 + 1.0 + SLACK
    finally:
        srv.resume()
    await holder.release()
    await client.aclose()
    await holder_client.aclose()


async def test_release_extend_and_inspect_on_a_hung_server_take_one_socket_timeout(
    make_server: Any,
) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=1.0)
    lock = redlease.Lock(client, "stuck", ttl=30.0, renew=False)
    await lock.acquire()
    srv.pause()
    try:
        for call in (lock.inspect, lock.extend, lock.release):
            started = time.monotonic()
            with pytest.raises(redlease.LockUnavailable):
                await call()
            assert time.monotonic() - started < 1.0 + SLACK
    finally:
        srv.resume()
    await client.aclose()


async def test_server_restarting_empty_is_reported_lost(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=1.0)
    lost: list[int] = []
    lock = redlease.Lock(client, "amnesia", ttl=0.6, on_lost=lambda: lost.append(1))
    await lock.acquire()
    srv.restart(empty=True)

    async def noticed() -> bool:
        return bool(lost)

    assert await wait_until(noticed)
    with pytest.raises(redlease.LockLost):
        await lock.release()
    await client.aclose()


async def test_connections_the_server_closed_while_idle_are_replaced(
    async_client: redis.asyncio.Redis,
) -> None:
    """redlease keeps its connections between calls; one the server closed meanwhile (its
    `timeout`, a restart, CLIENT KILL) is found closed before use and replaced: the next call
    works, where reusing it would have raised LockUnavailable."""
    lock = redlease.Lock(async_client, "kept-connections", renew=False)
    for _ in range(3):
        assert await lock.acquire()
        await lock.release()
    kept = runtime_for(async_client).backend.keeper.kept
    assert kept  # the twin of the check below: there are kept connections to kill
    killed = 0
    for conn, _ in kept:
        killed += await async_client.client_kill_filter(_id=str(await conn_id(conn)))
    assert killed == len(kept)
    await AsyncTasks.sleep(2 * TRUSTED)  # idle longer than a connection is trusted unchecked
    assert await lock.acquire()  # on a fresh connection, not a LockUnavailable
    await lock.release()


async def test_twin_a_killed_connection_reused_unchecked_fails_the_call(
    async_client: redis.asyncio.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The twin: trusted unchecked (as within TRUSTED of its last reply), a connection the
    server closed fails the call that reuses it."""
    monkeypatch.setattr(keeper_module, "TRUSTED", 1e9)
    lock = redlease.Lock(async_client, "kept-connections-twin", renew=False)
    assert await lock.acquire()
    await lock.release()
    kept = runtime_for(async_client).backend.keeper.kept
    for conn, _ in kept:
        await async_client.client_kill_filter(_id=str(await conn_id(conn)))
    with pytest.raises(redlease.LockUnavailable):
        await lock.acquire()


async def conn_id(conn: Any) -> int:
    """The server's id of one of redlease's connections."""
    await conn.send_command("CLIENT", "ID")
    return int(await conn.read_response())


async def renewal_on_a_killed_kept_connection(
    client: redis.asyncio.Redis, caplog: pytest.LogCaptureFixture, name: str
) -> tuple[list[logging.LogRecord], bool]:
    """Hold ``name`` (ttl 0.6 s), kill the one connection kept since the acquire, and let
    the watchdog renew on it (trusted unchecked, as within TRUSTED of its last reply).
    Returns the renewal failures logged, and whether the lock is still held 1.2 s later."""
    caplog.set_level(logging.INFO, logger="redlease")
    lock = redlease.Lock(client, name, ttl=0.6)
    assert await lock.acquire()
    kept = runtime_for(client).backend.keeper.kept
    assert len(kept) == 1
    await client.client_kill_filter(_id=str(await conn_id(kept[0][0])))
    await AsyncTasks.sleep(1.2)  # several renewals (every 0.2 s)
    held = await lock.owned()
    await lock.release()
    failed = [r for r in caplog.records if getattr(r, "redlease_event", None) == "renewal_failed"]
    return failed, held


async def test_a_renewal_on_a_killed_connection_goes_again_at_once(
    async_client: redis.asyncio.Redis,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(keeper_module, "TRUSTED", 1e9)
    failed, held = await renewal_on_a_killed_kept_connection(async_client, caplog, "renew-kill")
    assert held
    assert failed == []  # not even once: the batch went again on another connection


async def test_twin_a_renewal_tried_once_fails_on_a_killed_connection(
    async_client: redis.asyncio.Redis,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check above catches a renewal that is not tried again: it fails (and waits for the
    watchdog's retry)."""
    monkeypatch.setattr(keeper_module, "TRUSTED", 1e9)

    async def once(self: Any, script: Any, due: Any) -> Any:
        return await self._renew(script, due, min(h.renew_by() for h in due))

    monkeypatch.setattr(server_renewal_module.AsyncServerRenewal, "renew", once)
    failed, _ = await renewal_on_a_killed_kept_connection(async_client, caplog, "renew-kill-2")
    assert len(failed) >= 1
