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
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._async.client import AsyncBackend
from redlease.server import RedisServer

pytestmark = pytest.mark.timeout(60)
# Longer than the old path took to give up (sync: three handshakes in turn, 0.1 s each,
# before a majority had failed), shorter than the connect timeout (at least 1 s).
PAUSE = 0.6


async def acquire_while_connecting(servers: list[RedisServer]) -> tuple[bool, int | None]:
    """A fresh Redlock with the default ``server_timeout`` acquires once (on connections it
    opens) while every server is paused for :data:`PAUSE` seconds: whether it got the lock,
    and its fence."""
    clients = [redis.asyncio.Redis(host=srv.host, port=srv.port) for srv in servers]
    try:
        # Each server's identity (asked once per client) first, on connections of their own:
        # the one slow handshake left to show is the round's (sync: identifying 5 servers in
        # turn would take up the pause first).
        first = redlease.Redlock(clients, "connect", ttl=10.0, server_timeout=2.0)
        assert await first.acquire(blocking=False)
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
        fence = lock.fence
        if got:
            await lock.release()
        return got, fence
    finally:
        for client in clients:
            await redlease.close(client)
            await client.aclose()


async def test_first_round_is_not_spent_connecting(redlock_servers: list[RedisServer]) -> None:
    got, fence = await acquire_while_connecting(redlock_servers)
    assert got and fence == 2


async def test_twin_connect_billed_to_the_deadline_fails_the_first_round(
    redlock_servers: list[RedisServer], monkeypatch: Any
) -> None:
    monkeypatch.setattr(AsyncBackend, "connect_grace", False)  # the old behaviour
    with pytest.raises(redlease.QuorumUnavailable, match="servers answered"):
        await acquire_while_connecting(redlock_servers)
