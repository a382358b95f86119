"""A Redlock's first round on new connections: opening them is not billed to
``server_timeout`` (asyncio; tests/_sync/test_redlock_connect.py is generated).

On a loaded machine, connecting (TCP, then the handshake: CLIENT SETINFO...) can take longer
than the default 0.1 s per-server deadline, and the first acquire of a fresh Redlock failed
with "0 of 5 answered". Here the servers are paused (SIGSTOP) while a fresh Redlock's first
round opens its connections: a connect slowed far past the deadline, and bounded (resumed
by a timer, and in ``finally``). The twin turns the grace off and shows that round then
fails.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._async import redlock_servers as servers_module
from redlease._async.one_server import AsyncBackend
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(60)
# Longer than the old path took to give up (sync: three handshakes in turn, 0.1 s each,
# before a majority had failed), shorter than the connect timeout (at least 1 s).
PAUSE = 0.6


async def acquire_while_connecting(servers: list[RedisServer]) -> tuple[bool, bool]:
    """A fresh Redlock with the default ``server_timeout`` acquires once (on connections it
    opens) while every server is paused for :data:`PAUSE` seconds: whether it got the lock,
    and whether its fence was above the first one's."""
    clients = [redis.asyncio.Redis(host=srv.host, port=srv.port) for srv in servers]
    try:
        # Each server's identity (asked once per client) first, on connections of their own:
        # the one slow handshake left to show is the round's (sync: identifying 5 servers in
        # turn would take up the pause first).
        first = redlease.Redlock(clients, "connect", ttl=10.0, server_timeout=2.0)
        assert await first.acquire(blocking=False)
        before = first.fence or 0
        await first.release()
        lock = redlease.Redlock(clients, "connect", ttl=10.0)  # server_timeout 0.1: new conns
        timer = threading.Timer(PAUSE, lambda: [srv.resume() for srv in servers])
        for srv in servers:
            srv.pause()
        timer.start()
        try:
            got = await lock.acquire(blocking=False)
        finally:
            timer.cancel()
            timer.join()
            for srv in servers:
                if srv.paused:
                    srv.resume()
        later = (lock.fence or 0) > before
        if got:
            await lock.release()
        return got, later
    finally:
        for client in clients:
            await redlease.close(client)
            await client.aclose()


async def test_first_round_is_not_spent_connecting(redlock_servers: list[RedisServer]) -> None:
    got, later = await acquire_while_connecting(redlock_servers)
    assert got and later


async def test_twin_connect_billed_to_the_deadline_fails_the_first_round(
    redlock_servers: list[RedisServer], monkeypatch: Any
) -> None:
    monkeypatch.setattr(AsyncBackend, "connect_grace", False)  # the old behaviour
    with pytest.raises(redlease.QuorumUnavailable, match="servers answered"):
        await acquire_while_connecting(redlock_servers)


# -- a server that hangs from a Redlock's first contact ------------------------------------

HUNG = (3, 4)
DEADLINE = 0.5  # server_timeout: a server known down gets this for a new handshake


async def acquire_times_with_two_hung_from_the_start(servers: list[RedisServer]) -> list[float]:
    """Seconds each of three acquires of a fresh Redlock took while servers HUNG hang from
    its first contact (they cannot be identified: see ``Redlock._check_servers``)."""
    clients = [redis.asyncio.Redis(host=srv.host, port=srv.port) for srv in servers]
    fresh: list[Any] = []
    try:
        old = redlease.Redlock(clients, "identify", ttl=10.0)
        assert await old.acquire(blocking=False)  # an old name: every server has its fence
        await old.release()
        for i in HUNG:
            servers[i].pause()
        fresh = [redis.asyncio.Redis(host=srv.host, port=srv.port) for srv in servers]
        lock = redlease.Redlock(fresh, "identify", ttl=10.0, server_timeout=DEADLINE)
        times = []
        for _ in range(3):  # bounded: at most a connect timeout, then a deadline, each
            start = time.monotonic()
            assert await lock.acquire(blocking=False)
            times.append(time.monotonic() - start)
            await lock.release()
        return times
    finally:
        for i in HUNG:
            servers[i].resume()
        for client in [*clients, *fresh]:
            await redlease.close(client)
            await client.aclose()


async def test_a_server_hung_from_the_start_is_not_asked_before_every_acquire(
    redlock_servers: list[RedisServer],
) -> None:
    """It is identified once it answers a round again; the first acquire met it (its
    connect timeout, once for all hung servers)."""
    times = await acquire_times_with_two_hung_from_the_start(redlock_servers)
    assert max(times[1:]) < 0.5 * DEADLINE, times


async def test_twin_identifying_it_before_every_acquire_costs_each_a_deadline(
    redlock_servers: list[RedisServer], monkeypatch: Any
) -> None:
    monkeypatch.setattr(servers_module, "hung", lambda backend: False)  # the old behaviour
    times = await acquire_times_with_two_hung_from_the_start(redlock_servers)
    assert min(times[1:]) >= 0.9 * DEADLINE, times  # fails the check above
