"""Redlock with a server that hangs (SIGSTOP): the calls return at a majority, and a grant
that comes late is undone (asyncio; tests/_sync/test_redlock_late.py is generated).

Each fault test has a twin that breaks what it checks and shows the check then fails.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._core import redlock as core
from redlease._core import redlock_argv
from redlease._core.lock import RELEASE, LockKeys
from redlease._fanout import Late
from tests._async.helpers import wait_until
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(60)
TIMED = LockKeys.build("redlease", b"timed")
KEYS = LockKeys.build("redlease", b"late")  # each test its own lock: no late call of one
HUNG = 4  # the server each test pauses
SERVER_TIMEOUT = 1.0  # long, so that waiting for the hung server shows


async def warm(lock: Any) -> int:
    """Connections to every server open (a reply hangs, not a connection handshake); the
    fence it took."""
    assert await lock.acquire(blocking=False)
    fence = lock.fence or 0
    await lock.release()
    return fence


async def timed_acquire_release(
    clients: list[redis.asyncio.Redis], servers: list[RedisServer]
) -> tuple[float, float, bool]:
    """Seconds the acquire and the release took with server HUNG paused, and whether its
    fence was above the warm-up's."""
    lock = redlease.Redlock(clients, "timed", server_timeout=SERVER_TIMEOUT)
    warmed = await warm(lock)
    servers[HUNG].pause()
    try:
        start = time.monotonic()
        assert await lock.acquire(blocking=False)
        acquired = time.monotonic()
        later = (lock.fence or 0) > warmed
        await lock.release()
        released = time.monotonic()
    finally:
        servers[HUNG].resume()

    async def settled() -> bool:  # the hung server ran what it was sent: all free
        return not await clients[HUNG].exists(TIMED.lock)

    assert await wait_until(settled, limit=5)
    return acquired - start, released - acquired, later


async def test_returns_at_a_majority_while_a_server_hangs(
    async_redlock_clients: list[Any], redlock_servers: list[RedisServer]
) -> None:
    took, released, later = await timed_acquire_release(async_redlock_clients, redlock_servers)
    assert later
    # Each in well under the hung server's deadline (it would cost SERVER_TIMEOUT).
    assert took < SERVER_TIMEOUT / 2
    assert released < SERVER_TIMEOUT / 2


async def test_twin_waiting_for_every_server_costs_the_deadline(
    async_redlock_clients: list[Any],
    redlock_servers: list[RedisServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check above catches a Redlock that waits for all servers."""
    monkeypatch.setattr(core, "acquire_settled", lambda replies: False)
    took, _, _ = await timed_acquire_release(async_redlock_clients, redlock_servers)
    assert took >= SERVER_TIMEOUT * 0.9  # fails the check above


async def late_grant(
    clients: list[redis.asyncio.Redis], servers: list[RedisServer]
) -> tuple[bool, Any]:
    """A rival holds servers 0 and 1, server HUNG hangs: the acquire fails (2 grants of 5)
    while its grant on HUNG is still to come. Returns the acquire's result and what holds
    the lock on HUNG once it ran the acquire (its fence counter says so)."""
    lock = redlease.Redlock(clients, "late", server_timeout=0.3)
    await warm(lock)
    for c in clients[:2]:
        await c.set(KEYS.lock, b"rival", px=10_000)
    fence_before = int(await clients[HUNG].get(KEYS.fence) or 0)
    servers[HUNG].pause()
    try:
        got = await lock.acquire(blocking=False)
    finally:
        servers[HUNG].resume()

    async def ran() -> bool:  # the late acquire ran on HUNG: it granted, and took a fence
        return int(await clients[HUNG].get(KEYS.fence) or 0) > fence_before

    assert await wait_until(ran, limit=5)
    await wait_until(lambda: _gone(clients[HUNG]), limit=1)  # the release behind it, if sent
    return got, await clients[HUNG].get(KEYS.lock)


async def _gone(client: redis.asyncio.Redis) -> bool:
    return not await client.exists(KEYS.lock)


async def test_a_late_grant_is_undone(
    async_redlock_clients: list[Any], redlock_servers: list[RedisServer]
) -> None:
    got, holder = await late_grant(async_redlock_clients, redlock_servers)
    assert got is False
    assert holder is None  # released right after it was granted: the lock is free there


async def test_twin_a_late_grant_left_alone_stays_held(
    async_redlock_clients: list[Any],
    redlock_servers: list[RedisServer],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check above catches an undo that skips the servers whose reply was late."""

    async def undo_answered_only(
        self: Any, token: bytes, servers: list[int], errors: dict[int, Any], ticket: Any
    ) -> None:
        rest = [i for i in servers if not isinstance(errors.get(i), Late)]
        if rest:
            args = redlock_argv.release(token=token, window_ms=self._window_ms)
            await self._servers.round(RELEASE, self._lock_keys, args, servers=rest)

    monkeypatch.setattr(redlease.Redlock, "_undo", undo_answered_only)
    got, holder = await late_grant(async_redlock_clients, redlock_servers)
    assert got is False
    assert holder is not None  # fails the check above: our late grant holds it for its lease
