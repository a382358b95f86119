"""asyncio only: a cancelled acquire returns at once; its clean-up goes on in the background."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from tests._async.helpers import wait_until

pytestmark = pytest.mark.timeout(60)


async def test_wait_for_on_a_hung_server_returns_at_its_timeout(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=2.0)
    lock = redlease.Lock(client, "cancel", ttl=1.0)
    assert not await lock.locked()  # a warm connection: the acquire's script is sent
    srv.pause()
    try:
        started = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(lock.acquire(), 0.3)
        # The shielded undo used to be awaited for a whole socket timeout (2.3 s here).
        assert time.monotonic() - started < 0.3 + 1.5
    finally:
        srv.resume()

    async def free() -> bool:
        return not await redlease.Lock(client, "cancel").locked()

    assert await wait_until(free, limit=5.0)  # the undo (or the lease) ran its course
    await client.aclose()
