"""A renewal's own I/O is bounded by the leases it renews (issue 23, item 4).

With the server hung (SIGSTOP) and another caller of the same client inside a call there, the
watchdog's renewal needs a connection of its own: its handshake waited for the socket
timeout, and ``on_lost`` came one socket timeout late (3.2-4.3 s after the hang for a 1 s
lease). Connecting, sending and reading are all bounded by the earliest lease end of the
batch, so ``on_lost`` comes about when the lease ends.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from tests._async.helpers import wait_until
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)

SOCKET_TIMEOUT = 5.0
BOUND = 2.5  # seconds after the hang by which a 1 s lease's on_lost must have come


async def test_on_lost_comes_within_the_lease_while_another_call_hangs(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=SOCKET_TIMEOUT)
    lost: list[float] = []
    lock = redlease.Lock(
        client, "deadline:held", ttl=1.0, on_lost=lambda: lost.append(time.monotonic())
    )
    busy = redlease.Lock(client, "deadline:busy", ttl=1.0)
    assert await lock.acquire()
    srv.pause()
    hung_at = time.monotonic()
    try:
        # Another caller of the same client, inside a call on the hung server: it holds the
        # connection the watchdog would have used.
        started = AsyncTasks.spawn(lambda: busy.acquire(timeout=1.0))

        async def told() -> bool:
            return bool(lost)

        assert await wait_until(told, limit=SOCKET_TIMEOUT + 3)
    finally:
        srv.resume()
    late = lost[0] - hung_at
    print(f"on_lost {late:.2f} s after the hang (lease 1 s, socket timeout {SOCKET_TIMEOUT} s)")
    assert late < BOUND
    assert isinstance(await AsyncTasks.outcome(started), (bool, redlease.LockUnavailable))
    with pytest.raises(redlease.LockLost):
        await lock.release()
    await redlease.close(client)
    await client.aclose()


async def test_twin_a_call_without_the_bound_takes_the_socket_timeout(make_server: Any) -> None:
    """The check above would catch the old bound: on the same busy, hung client, a call
    bounded only by the socket timeout (as the renewal's handshake was) ends past BOUND."""
    socket_timeout = 3.0
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=socket_timeout)
    lock = redlease.Lock(client, "deadline:plain", ttl=10.0)
    busy = redlease.Lock(client, "deadline:busy", ttl=1.0)
    assert await lock.acquire()
    srv.pause()
    try:
        hung_at = time.monotonic()
        started = AsyncTasks.spawn(lambda: busy.acquire(timeout=1.0))
        await AsyncTasks.sleep(0.1)
        with pytest.raises(redlease.LockUnavailable):
            await lock.locked()  # a new connection, handshake included: the socket timeout
        took = time.monotonic() - hung_at
    finally:
        srv.resume()
    print(f"a plain call on the hung, busy client took {took:.2f} s")
    assert took >= BOUND
    await AsyncTasks.outcome(started)
    await lock.release()
    await redlease.close(client)
    await client.aclose()
